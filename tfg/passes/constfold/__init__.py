"""Constant folding (Grappler's ConstantFolding): repeat until nothing changes: materialize
shapes, fold constant subgraphs, simplify with constants, drop dead branches of constant
Switches.

    >>> g2 = optimize(g, passes=["constfold"], keep=["d"])
    # before: a=Const 1, b=Const 2, c=AddN(a, b), d=AddN(b, c)   after: d=Const 5

Never folded: stateful or random ops, Placeholder/PlaceholderWithDefault (users feed them),
fed nodes, frame-changing control flow (nodes inside a loop fold only when their inputs are
constants of that frame), outputs over 100 KiB that are larger than their inputs.
"""
from tfg.passes.constfold.fold import evaluate, fold_constants, foldable, materialize_shapes
from tfg.passes.constfold.simplify import rules as simplify_rules
from tfg.passes.constfold.switch import fold_constant_switches
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import RewriteContext, graph_rewrite

MAX_ITERATIONS = 10


@register_pass("constfold", "Constant folding: materialize known shapes, evaluate constant "
               "subgraphs with the CPU kernels, simplify x*1, x+0, 1/y, x/c, c1+(c2+x), "
               "identity reshapes/transposes/slices, constant-predicate Switches.")
def constant_folding(graph, opts):
    """Run the constant-folding stages to a fixed point; returns whether anything changed."""
    changed_any = False
    rules = simplify_rules()
    for _ in range(MAX_ITERATIONS):
        ctx = RewriteContext(graph, opts, stage="ConstantFolding")
        changed = materialize_shapes(ctx)
        changed |= fold_constants(ctx)
        changed |= fold_constant_switches(ctx)
        changed |= graph_rewrite(ctx, rules, max_rounds=3)
        changed_any |= changed
        if not changed:
            break
    return changed_any


__all__ = ["constant_folding", "evaluate", "fold_constants", "foldable", "materialize_shapes"]
