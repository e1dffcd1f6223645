#!/usr/bin/python3
"""Unit test of phub.launch (rank and world size from the launchers' variables) and of Client.from_env, which
uses it. Every case builds its own environment dictionary: nothing is read from this process's environment
and no client connects (from_env is called on a subclass whose constructor records its arguments).
Prints `SUBTESTS passed=N failed=M` (tools/test/summarize.py counts the cases).
Usage: launch_test.py   (PYTHONPATH=<build>/lib/client/python)"""
import sys
import unittest

import phub
import phub.launch as launch

# A world per launcher, each with values of its own, so that a case sees which launcher decided.
PHUB = {"PHUB_RANK": "6", "PHUB_WORLD_SIZE": "7"}
TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "PMIX_RANK": "2"}
HYDRA = {"PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "3"}
SRUN = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0"}
JOB = {"PHUB_SERVER": "198.18.0.1", "PHUB_PORT_BASE": "40000", "PHUB_JOB": "3"}


def env(*parts, **extra):
    out = {}
    for p in parts:
        out.update(p)
    out.update(extra)
    return out


class Recorded(phub.Client):
    """from_env's cls: records the settings instead of connecting."""

    def __init__(self, **settings):  # noqa: super().__init__ would connect
        self.settings = settings


class Detect(unittest.TestCase):
    def refused(self, environment, *names):
        """detect() raises LaunchError (a KeyError) whose text names every one of names; returns the text."""
        with self.assertRaises(launch.LaunchError) as caught:
            launch.detect(environment)
        text = str(caught.exception)
        self.assertIsInstance(caught.exception, KeyError)
        self.assertTrue(text.startswith("phub: "), text)
        for name in names:
            self.assertIn(name, text)
        return text

    def test_each_launcher_alone(self):
        cases = [(PHUB, "explicit", 6, 7, None, None), (TORCHRUN, "torchrun", 5, 8, 1, 2),
                 (OPENMPI, "OpenMPI", 2, 4, 0, 1), (HYDRA, "MPICH/PMI", 1, 3, 1, 3), (SRUN, "SLURM", 1, 2, 0, None)]
        for variables, name, rank, size, local_rank, local_size in cases:
            with self.subTest(launcher=name):
                found = launch.detect(dict(variables))
                self.assertEqual((found.launcher, found.rank, found.world_size, found.local_rank,
                                  found.local_world_size, found.outer), (name, rank, size, local_rank, local_size, ()))

    def test_order_the_first_launcher_set_decides(self):
        order = [PHUB, TORCHRUN, OPENMPI, HYDRA, SRUN]
        names = [l.name for l in launch.LAUNCHERS]
        for i in range(len(order) - 1):
            with self.subTest(first=names[i]):
                # the two worlds of each pair made consistent for the WORLD_SIZE check: torchrun's 8 >= the rest
                found = launch.detect(env(*order[i:]))
                self.assertEqual(found.launcher, names[i])
                self.assertEqual(found.outer, tuple(names[i + 1:]))

    def test_srun_or_mpirun_around_torchrun(self):
        found = launch.detect(env(SRUN, TORCHRUN))  # srun starts torchrun on each host: SLURM numbers the hosts
        self.assertEqual((found.rank, found.world_size, found.local_rank, found.outer), (5, 8, 1, ("SLURM",)))
        found = launch.detect(env(OPENMPI, TORCHRUN))  # PMIX_RANK (2) numbers the hosts too: not compared
        self.assertEqual((found.rank, found.world_size, found.launcher), (5, 8, "torchrun"))
        self.assertEqual(launch.describe(found), "rank 5 of 8 (torchrun: RANK, WORLD_SIZE), local rank 1, inside OpenMPI")

    def test_nothing_set_names_every_variable_in_order(self):
        text = self.refused({"PATH": "/usr/bin"})
        at = 0
        for l in launch.LAUNCHERS:  # "RANK/WORLD_SIZE (torchrun)" after "PHUB_RANK/PHUB_WORLD_SIZE (explicit)", ...
            at = text.find("%s/%s (%s" % (l.rank, l.size, l.name), at)
            self.assertGreaterEqual(at, 0, "%s/%s not after the launchers before it: %s" % (l.rank, l.size, text))
        self.assertIn("docs/training.md", text)

    def test_partial_settings_name_both_variables(self):
        for l in launch.LAUNCHERS:
            for given in (l.rank, l.size):
                with self.subTest(given=given):
                    step = {"SLURM_STEP_ID": "3"} if l.name == "SLURM" else {}
                    text = self.refused(env(step, {given: "0" if given == l.rank else "2"}), l.rank, l.size)
                    self.assertIn("is not", text)

    def test_a_partial_launcher_first_in_order_is_refused_even_beside_a_complete_one(self):
        self.refused(env(OPENMPI, WORLD_SIZE="4"), "WORLD_SIZE", "RANK")
        self.refused(env(TORCHRUN, PHUB_RANK="1"), "PHUB_RANK", "PHUB_WORLD_SIZE")

    def test_values_that_are_not_a_rank_of_the_world(self):
        for rank, size in (("x", "4"), ("1", "four"), ("-1", "4"), ("4", "4"), ("0", "0"), ("1.0", "2")):
            with self.subTest(rank=rank, size=size):
                self.refused({"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": size},
                             "OMPI_COMM_WORLD_RANK" if rank in ("x", "1.0", "-1", "4") else "OMPI_COMM_WORLD_SIZE")
        self.refused({"RANK": "3", "WORLD_SIZE": "3"}, "RANK=3", "WORLD_SIZE=3", "0..WORLD_SIZE-1")
        self.assertEqual(launch.detect({"RANK": " 2 ", "WORLD_SIZE": "3"}).rank, 2)  # blanks around a number

    def test_local_ranks_are_checked(self):
        self.refused(env(TORCHRUN, LOCAL_RANK="2"), "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2")
        self.refused(env(TORCHRUN, LOCAL_WORLD_SIZE="0"), "LOCAL_WORLD_SIZE=0")
        self.refused(env(SRUN, SLURM_LOCALID="2"), "SLURM_LOCALID=2", "SLURM_NTASKS=2")
        self.refused(env(HYDRA, MPI_LOCALRANKID="one"), "MPI_LOCALRANKID")

    def test_pmix_rank_must_agree_with_openmpi_and_srun(self):
        self.refused(env(OPENMPI, PMIX_RANK="3"), "OMPI_COMM_WORLD_RANK=2", "PMIX_RANK=3")
        self.refused(env(SRUN, PMIX_RANK="0"), "SLURM_PROCID=1", "PMIX_RANK=0")
        self.assertEqual(launch.detect(env(SRUN, PMIX_RANK="1")).rank, 1)
        self.assertEqual(launch.detect(env(HYDRA, PMIX_RANK="0")).rank, 1)  # Hydra speaks PMI, not PMIx

    def test_pmix_rank_alone_gives_no_world_size(self):
        self.refused({"PMIX_RANK": "2"}, "PMIX_RANK=2", "no world size", "PHUB_WORLD_SIZE")

    def test_a_world_size_smaller_than_the_launcher_around_it_is_left_over(self):
        for outer, size_var in ((OPENMPI, "OMPI_COMM_WORLD_SIZE=4"), (HYDRA, "PMI_SIZE=3"), (SRUN, "SLURM_NTASKS=2")):
            with self.subTest(outer=size_var):
                self.refused(env(outer, RANK="0", WORLD_SIZE="1"), "WORLD_SIZE=1", size_var, "PHUB_RANK")
        self.assertEqual(launch.detect(env(OPENMPI, RANK="3", WORLD_SIZE="4")).rank, 3)  # as many: fine
        # PHUB_RANK/PHUB_WORLD_SIZE are the way out: never compared
        self.assertEqual(launch.detect(env(OPENMPI, PHUB_RANK="0", PHUB_WORLD_SIZE="1")).world_size, 1)

    def test_mpirun_inside_an_allocation_may_run_fewer_processes_than_srun_tasks(self):
        found = launch.detect(env(OPENMPI, SRUN, SLURM_NTASKS="8"))  # daemons on all 8 nodes, 4 ranks
        self.assertEqual((found.launcher, found.world_size, found.outer), ("OpenMPI", 4, ("SLURM",)))

    def test_slurm_variables_outside_an_srun_task_are_not_a_rank(self):
        batch = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "77"}
        self.refused(batch, "SLURM_STEP_ID", "batch script")
        found = launch.detect(env(batch, RANK="0", WORLD_SIZE="2"))  # not compared with the batch's 8
        self.assertEqual((found.world_size, found.outer), (2, ()))
        found = launch.detect(env(batch, SLURM_STEPID="0"))  # the older name of the step variable
        self.assertEqual((found.launcher, found.world_size), ("SLURM", 8))

    def test_empty_values_count_as_unset(self):
        found = launch.detect(env(OPENMPI, RANK="", WORLD_SIZE=" ", PHUB_RANK=""))
        self.assertEqual(found.launcher, "OpenMPI")


class TorchEnv(unittest.TestCase):
    def test_mpirun_gives_torch_its_variables(self):
        got = launch.torch_env(env(OPENMPI, MASTER_ADDR="198.18.0.12"))
        self.assertEqual(got, {"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                               "MASTER_ADDR": "198.18.0.12", "MASTER_PORT": "29500"})
        got = launch.torch_env(env(SRUN, MASTER_ADDR="node1", MASTER_PORT="29611"))
        self.assertEqual(got, {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "node1",
                               "MASTER_PORT": "29611"})

    def test_master_addr_is_needed_for_more_than_one_process(self):
        with self.assertRaises(launch.LaunchError) as caught:
            launch.torch_env(dict(HYDRA))
        self.assertIn("MASTER_ADDR", str(caught.exception))
        self.assertIn("-x MASTER_ADDR", str(caught.exception))
        self.assertEqual(launch.torch_env({"PHUB_RANK": "0", "PHUB_WORLD_SIZE": "1"})["MASTER_ADDR"], "127.0.0.1")

    def test_the_phub_override_reaches_torch_too(self):
        got = launch.torch_env(env(TORCHRUN, PHUB, MASTER_ADDR="h0"))
        self.assertEqual((got["RANK"], got["WORLD_SIZE"]), ("6", "7"))


class FromEnv(unittest.TestCase):
    def test_rank_and_workers_from_each_launcher(self):
        for variables, rank, workers in ((OPENMPI, 2, 4), (HYDRA, 1, 3), (SRUN, 1, 2), (TORCHRUN, 5, 8), (PHUB, 6, 7)):
            with self.subTest(variables=sorted(variables)[0]):
                got = Recorded.from_env(env(JOB, variables)).settings
                self.assertEqual((got["rank"], got["workers"], got["servers"], got["job"]),
                                 (rank, workers, "198.18.0.1", 3))

    def test_keyword_arguments_override_the_launcher(self):
        got = Recorded.from_env(dict(JOB), rank=1, workers=2).settings  # no launcher variable at all: not read
        self.assertEqual((got["rank"], got["workers"]), (1, 2))
        got = Recorded.from_env(env(JOB, OPENMPI), rank=0).settings  # the rank given, the size from mpirun
        self.assertEqual((got["rank"], got["workers"]), (0, 4))

    def test_no_launcher_is_refused_naming_what_was_looked_at(self):
        with self.assertRaises(KeyError) as caught:
            Recorded.from_env(dict(JOB))
        for name in ("PHUB_RANK", "RANK/WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
            self.assertIn(name, str(caught.exception))
        with self.assertRaises(KeyError) as caught:
            Recorded.from_env(env(JOB, OMPI_COMM_WORLD_RANK="1"))
        self.assertIn("OMPI_COMM_WORLD_SIZE", str(caught.exception))


def main():
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(
        unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]))
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    print("SUBTESTS passed=%d failed=%d" % (result.testsRun - failed, failed), flush=True)
    return 0 if result.testsRun and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
