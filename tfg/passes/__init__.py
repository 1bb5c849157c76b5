"""Graph-to-graph passes, one module or subpackage each (grad, prune, constfold, arith, layout,
remap, place, partition) and the pass manager. Importing this package loads nothing heavy;
passes whose modules are missing in a checkout are simply absent.
"""
import importlib as _importlib

for _name in ("grad",):
    try:
        _importlib.import_module(f"{__name__}.{_name}")
    except ImportError:  # pragma: no cover - a partial checkout
        pass

try:  # the optimizer's Python API: tfg.passes.optimize(graph, passes=None, keep=...) and
    # tfg.passes.prune(graph, fetches, targets, feeds) (the function shadows its module here).
    from tfg.passes.manager import optimize  # noqa: F401,E402
    from tfg.passes.prune import prune  # noqa: F401,E402
except ImportError:  # pragma: no cover - a partial checkout
    pass
