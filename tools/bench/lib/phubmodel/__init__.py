"""The scale model behind tools/model: step time of a data-parallel training step for a ring allreduce, a flat
parameter server, a sharded parameter server and hierarchical phub, from link rates, oversubscription, RTT, the
model's size and compute, and the server's cycles per frame measured by tools/bench/pktgen (calibration.py).
systems.py is the arithmetic (pure), measured.py the benches' measured points, plots.py the figures."""


class ModelError(ValueError):
    """An input the model refuses (out of its range, or not a number it can use); the message says which."""
