"""Graph-to-graph passes, one module or subpackage each (grad, prune, constfold, arith, layout,
remap, place, partition) and the pass manager.

The optimizer's Python API: `tfg.passes.optimize(graph, passes=None, keep=...)` and
`tfg.passes.prune(graph, fetches, targets, feeds)` (the function shadows its module here).
"""
from tfg.passes import grad  # noqa: F401
from tfg.passes.manager import optimize  # noqa: F401
from tfg.passes.prune import prune  # noqa: F401
