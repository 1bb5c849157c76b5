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
