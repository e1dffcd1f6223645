"""Which rank this process is, and of how many: read from the variables that launchers set.

    import phub.launch
    found = phub.launch.detect()              # found.rank, found.world_size, found.local_rank, found.launcher
    phub.launch.init_process_group("gloo")    # torch.distributed under mpirun, srun, torchrun or by hand

phub.Client.from_env() takes its rank and workers from detect(). The order, and why (docs/training.md,
"Launchers"): the first launcher in LAUNCHERS with any of its variables set decides.
  1. PHUB_RANK, PHUB_WORLD_SIZE                      set by hand: they override every launcher
  2. RANK, WORLD_SIZE                                torchrun, torch.multiprocessing scripts, the probe's rankmap.env
  3. OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE      OpenMPI's mpirun (its PMIX_RANK must agree)
  4. PMI_RANK, PMI_SIZE                              MPICH's and Intel MPI's Hydra mpiexec
  5. SLURM_PROCID, SLURM_NTASKS                      a task that srun started (SLURM_STEP_ID set; its PMIX_RANK
                                                     must agree)
A launcher that starts processes inside another launcher's tasks sets its own variables beside the outer
one's, which its processes inherit: srun or mpirun starting torchrun on every host is the usual case, and
there RANK and WORLD_SIZE are right and SLURM_PROCID or OMPI_COMM_WORLD_RANK number the hosts. So torchrun's
variables come before those of MPI and SLURM, and the explicit PHUB_ ones before all. An inner launcher starts
at least one process in each task of the outer one, so a WORLD_SIZE smaller than an MPI or srun world size
below it is a leftover from a shell, and refused.
"""
import os
from collections import namedtuple

# One row per launcher, in the order of precedence: (name, rank variable, size variable, local rank variable,
# local size variable). A local variable may be None: that launcher does not say.
Launcher = namedtuple("Launcher", "name rank size local_rank local_size")
LAUNCHERS = (
    Launcher("explicit", "PHUB_RANK", "PHUB_WORLD_SIZE", None, None),
    Launcher("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    Launcher("OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE"),
    Launcher("MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    Launcher("SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
)
SLURM_STEP = ("SLURM_STEP_ID", "SLURM_STEPID")  # set in every task srun starts, not in a batch script itself
PMIX_RANK = "PMIX_RANK"  # PMIx gives the rank, never the world size; checked against the launchers that set it
PMIX_CHECKED = ("OpenMPI", "SLURM")
DEFAULT_MASTER_PORT = "29500"  # torchrun's, and the one in phub-probe's rankmap.env


class LaunchError(KeyError):
    """The environment names no rank and world size, or names them partly or inconsistently. A KeyError, as a
    missing variable of phub.Client.from_env has always been; its text is the message alone."""

    def __str__(self):
        return self.args[0] if self.args else ""


Found = namedtuple("Found", "rank world_size local_rank local_world_size launcher variables outer")
Found.__doc__ = """What detect() found: rank and world_size; local_rank and local_world_size (None where the
launcher does not say); launcher (a name of LAUNCHERS); variables (the names it read the rank and the size
from); outer (names of the launchers further down the order that are also set: srun or mpirun around torchrun)."""


def _describe_order():
    parts = ["%s/%s (%s)" % (l.rank, l.size, l.name + (", in a task srun started: SLURM_STEP_ID set"
                                                      if l.name == "SLURM" else "")) for l in LAUNCHERS]
    return ", ".join(parts)


def _set(env, name):
    value = env.get(name) if name else None
    return value is not None and value.strip() != ""


def _integer(env, name, launcher):
    text = env[name].strip()
    try:
        return int(text, 10)
    except ValueError:
        raise LaunchError("phub: %s=%r (%s) is not a whole number" % (name, env[name], launcher)) from None


def _in_slurm_step(env):
    return any(_set(env, name) for name in SLURM_STEP)


def _present(env, launcher):
    """Whether any of the launcher's rank and size variables is set (SLURM's only inside a task of srun)."""
    if launcher.name == "SLURM" and not _in_slurm_step(env):
        return False
    return _set(env, launcher.rank) or _set(env, launcher.size)


def _read(env, launcher):
    """(rank, size, local rank, local size) of a launcher whose variables are set; LaunchError if only one of
    rank and size is, or if they are not a rank in 0..size-1 of a size of at least 1."""
    missing = [name for name in (launcher.rank, launcher.size) if not _set(env, name)]
    if missing:
        given = launcher.size if missing == [launcher.rank] else launcher.rank
        raise LaunchError("phub: %s=%s is set but %s is not: %s sets both; set both or neither (or PHUB_RANK and "
                          "PHUB_WORLD_SIZE, which override it)" % (given, env[given], missing[0], launcher.name))
    rank, size = _integer(env, launcher.rank, launcher.name), _integer(env, launcher.size, launcher.name)
    if size < 1 or not 0 <= rank < size:
        raise LaunchError("phub: %s=%d and %s=%d (%s) are not a rank of that world: the rank must be in 0..%s-1"
                          % (launcher.rank, rank, launcher.size, size, launcher.name, launcher.size))
    local_rank = _integer(env, launcher.local_rank, launcher.name) if _set(env, launcher.local_rank) else None
    local_size = _integer(env, launcher.local_size, launcher.name) if _set(env, launcher.local_size) else None
    if local_size is not None and local_size < 1:
        raise LaunchError("phub: %s=%d (%s) is not a number of processes" % (launcher.local_size, local_size,
                                                                           launcher.name))
    if local_rank is not None and not (0 <= local_rank < (local_size if local_size is not None else size)):
        raise LaunchError("phub: %s=%d (%s) is not a local rank of %s" % (
            launcher.local_rank, local_rank, launcher.name,
            "%s=%d" % ((launcher.local_size, local_size) if local_size is not None else (launcher.size, size))))
    return rank, size, local_rank, local_size


def _nothing_found(env):
    notes = []
    if not _in_slurm_step(env) and (_set(env, "SLURM_PROCID") or _set(env, "SLURM_NTASKS")):
        notes.append("SLURM_PROCID/SLURM_NTASKS are set but neither SLURM_STEP_ID nor SLURM_STEPID is: this is a "
                     "batch script or an salloc shell, not a task that srun started (run the script with srun)")
    if _set(env, PMIX_RANK):
        notes.append("%s=%s is set, but PMIx gives no world size: set PHUB_RANK and PHUB_WORLD_SIZE" % (
            PMIX_RANK, env[PMIX_RANK]))
    return LaunchError("phub: no rank and world size in the environment; looked at, in this order: %s%s "
                       "(docs/training.md, \"Launchers\")" % (_describe_order(), "".join("; " + n for n in notes)))


def detect(env=None):
    """This process's rank and world size from its launcher's variables (the order: the module's docstring and
    docs/training.md). Raises LaunchError, naming the variables, when none is set, when the deciding launcher
    sets only one of its two or values that are not a rank of that world, when PMIX_RANK disagrees with the
    rank of OpenMPI or srun, or when WORLD_SIZE is smaller than an MPI or srun world size below it."""
    env = os.environ if env is None else env
    chosen = next((l for l in LAUNCHERS if _present(env, l)), None)
    if chosen is None:
        raise _nothing_found(env)
    rank, size, local_rank, local_size = _read(env, chosen)
    if chosen.name in PMIX_CHECKED and _set(env, PMIX_RANK):
        pmix = _integer(env, PMIX_RANK, "PMIx")
        if pmix != rank:
            raise LaunchError("phub: %s=%d and %s=%d disagree: %s and PMIx must name the same rank" % (
                chosen.rank, rank, PMIX_RANK, pmix, chosen.name))
    outer = []
    for lower in LAUNCHERS[LAUNCHERS.index(chosen) + 1:]:
        if not _present(env, lower):
            continue
        outer.append(lower.name)
        if chosen.name != "torchrun":
            continue  # MPI inside an allocation may run fewer processes than srun started daemons
        try:
            lower_size = _read(env, lower)[1]
        except LaunchError:
            continue  # an outer launcher's own trouble is not this process's: it is only compared against
        if size < lower_size:
            raise LaunchError(
                "phub: %s=%d is smaller than %s=%d (%s): a launcher run inside %s's processes (torchrun) starts "
                "at least one process in each, so %s and %s are left over from elsewhere (a shell?); unset them, "
                "or set PHUB_RANK and PHUB_WORLD_SIZE, which override every launcher"
                % (chosen.size, size, lower.size, lower_size, lower.name, lower.name, chosen.rank, chosen.size))
    return Found(rank, size, local_rank, local_size, chosen.name, (chosen.rank, chosen.size), tuple(outer))


def describe(found):
    """One line for a log: 'rank 2 of 4 (OpenMPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), local rank 0'."""
    text = "rank %d of %d (%s: %s)" % (found.rank, found.world_size, found.launcher, ", ".join(found.variables))
    if found.local_rank is not None:
        text += ", local rank %d" % found.local_rank
    if found.outer:
        text += ", inside %s" % ", ".join(found.outer)
    return text


def _torch_env(env):
    found = detect(env)
    out = {"RANK": str(found.rank), "WORLD_SIZE": str(found.world_size)}
    if found.local_rank is not None:
        out["LOCAL_RANK"] = str(found.local_rank)
    if found.local_world_size is not None:
        out["LOCAL_WORLD_SIZE"] = str(found.local_world_size)
    if _set(env, "MASTER_ADDR"):
        out["MASTER_ADDR"] = env["MASTER_ADDR"].strip()
    elif found.world_size == 1:
        out["MASTER_ADDR"] = "127.0.0.1"
    else:
        raise LaunchError("phub: MASTER_ADDR is not set: torch.distributed needs the address of rank 0's host, "
                          "which only torchrun tells (found %s; with mpirun pass -x MASTER_ADDR=<the first host "
                          "of the hostfile>)" % describe(found))
    out["MASTER_PORT"] = env["MASTER_PORT"].strip() if _set(env, "MASTER_PORT") else DEFAULT_MASTER_PORT
    return found, out


def torch_env(env=None):
    """The variables of torch.distributed's env:// rendezvous for this process, from detect(): RANK,
    WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE (where the launcher says), MASTER_ADDR and MASTER_PORT. No
    launcher but torchrun tells where rank 0 runs: MASTER_ADDR must be set (mpirun: -x MASTER_ADDR=<the
    hostfile's first host>), except in a world of one (then 127.0.0.1); MASTER_PORT defaults to 29500."""
    return _torch_env(os.environ if env is None else env)[1]


def init_process_group(backend="gloo", **kwargs):
    """torch.distributed.init_process_group(backend, init_method="env://", **kwargs) under any launcher of
    detect(): first writes torch_env() into os.environ, so that torch.distributed, phub.Client.from_env and
    anything else that reads RANK and WORLD_SIZE see the same rank. Returns detect()'s Found."""
    found, values = _torch_env(os.environ)
    os.environ.update(values)
    import torch.distributed as dist  # here: importing torch takes seconds, and detect() needs none of it
    dist.init_process_group(backend, init_method="env://", **kwargs)
    return found
