"""phub: the Python worker API of the phub parameter server (ctypes over libphub-client).

    import phub
    c = phub.Client.from_env()          # RANK, WORLD_SIZE, PHUB_SERVER, PHUB_PORT_BASE, PHUB_JOB, ...
    c.allreduce(tensor)                 # in place, zero-copy on torch tensors and numpy arrays

phub.torch (imported on first use) has the DDP communication hook and the ps-mode optimizer.
"""
from .client import Client, Request, buffer_of
from .errors import PhubError, Resumed

__all__ = ["Client", "Request", "PhubError", "Resumed", "buffer_of", "torch"]


def __getattr__(name):
    if name == "torch":  # lazy: importing torch takes seconds
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(name)
