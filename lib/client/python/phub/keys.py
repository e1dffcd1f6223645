"""Print the Lua `keys = {...}` of a phub job for a PyTorch model.

    python3 -m phub.keys mypackage.models:make_model [--kwargs '{"width": 64}']

The attribute may be a torch.nn.Module or a callable that returns one (called with --kwargs).
"""
import argparse
import importlib
import json
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m phub.keys", description=__doc__.splitlines()[0])
    ap.add_argument("target", help="module:attribute naming a model or a factory of one")
    ap.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the factory")
    a = ap.parse_args(argv)
    module_name, _, attr = a.target.partition(":")
    if not attr:
        ap.error("target must look like module:attribute")
    sys.path.insert(0, ".")
    obj = getattr(importlib.import_module(module_name), attr)
    import torch
    from .torch import lua_keys
    model = obj if isinstance(obj, torch.nn.Module) else obj(**json.loads(a.kwargs))
    print(lua_keys(model))


if __name__ == "__main__":
    main()
