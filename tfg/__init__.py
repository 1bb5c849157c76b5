"""tfg: a toolchain for TensorFlow-style dataflow graphs, without TensorFlow.

    >>> import tfg
    >>> g = tfg.load("model.pb")
    >>> g = tfg.grad(g, ys=["loss"], xs=["w1", "w2"])
    >>> g = tfg.optimize(g, keep=["loss", "grad/w1"])
    >>> tfg.Session(g).run(["grad/w1"], feeds={"x": batch})
    >>> tfg.save(g, "model.pbtxt")

Every public name is imported on first use: `tfg --help` runs this file and must start without
numpy or protobuf (tests/test_layering.py checks it).
"""
import importlib

__version__ = "0.1.0"

# public name -> (module, attribute); attribute None means the module itself.
_LAZY = {
    "Graph": ("tfg.graphdef.graph", "Graph"),
    "Node": ("tfg.graphdef.graph", "Node"),
    "load": ("tfg.graphdef.io", "load"),
    "loads": ("tfg.graphdef.io", "loads"),
    "save": ("tfg.graphdef.io", "save"),
    "dumps": ("tfg.graphdef.io", "dumps"),
    "DType": ("tfg.schemas.dtypes", "DType"),
    "Session": ("tfg.executor.session", "Session"),
    "Runner": ("tfg.executor.runner", "Runner"),
    "grad": ("tfg.passes.grad", "grad"),
    "optimize": ("tfg.passes.manager", "optimize"),
    "prune": ("tfg.passes.prune", "prune"),
    "place": ("tfg.passes.place", "place"),
    "partition": ("tfg.passes.partition", "partition"),
    "builder": ("tfg.builder", None),
    "ClusterConfig": ("tfg.executor.distributed", "ClusterConfig"),
    "validate": ("tfg.graphdef.validate", "validate"),
    "infer": ("tfg.graphdef.infer", "infer"),
    "diff": ("tfg.graphdef.diff", "diff"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'tfg' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
