"""Arithmetic optimization: common-subgraph elimination (`cse`) and the ArithmeticOptimizer
stages (`arith`), registered as two passes.

    >>> g2 = optimize(g, passes=["cse", "arith"])
    # before: a = Mul(x, y); b = Mul(y, x); s = Add(a, b)     after: a = Mul(x, y); s = Mul(2, a)
"""
from tfg.passes.arith.cse import common_subgraph_elimination
from tfg.passes.arith.stages import rules as arith_rules
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import RewriteContext, graph_rewrite


@register_pass("cse", "Common-subgraph elimination: merge nodes with equal op, device, inputs "
               "and attrs (never stateful ops, Enter/Exit, CheckNumerics, preserved nodes).")
def cse(graph, opts):
    """Merge duplicate nodes; returns whether anything changed."""
    return common_subgraph_elimination(graph, opts)


@register_pass("arith", "Arithmetic optimizer: Add trees -> AddN, hoist common factors, "
               "remove involutions and no-op casts/reshapes, Square/Rsqrt/Log1p/Expm1/"
               "LogSoftmax rewrites, Transpose into MatMul, then CSE again.")
def arith(graph, opts):
    """The arithmetic stages to a fixed point, then CSE of what they made equal."""
    ctx = RewriteContext(graph, opts, stage="ArithmeticOptimizer")
    changed = graph_rewrite(ctx, arith_rules())
    changed |= common_subgraph_elimination(graph, opts)
    return changed


__all__ = ["cse", "arith", "common_subgraph_elimination"]
