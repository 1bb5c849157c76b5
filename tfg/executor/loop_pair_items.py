"""Two loop items of the outer schedule (tfg/executor/outer.py) merged into one pair item,
where tfg/executor/loop_pairs.py accepts their programs and no path joins them.

    Before (the outer view's items):  [..., loop fwd (in: 5, out: 3), loop bwd (in: 5, out: 3)]
    After:  [..., pair (in: fwd's 5 then bwd's 5, out: fwd's 3 then bwd's 3), NoOp]
            an edge from bwd's output k now leaves the pair's output 3 + k; an edge into
            bwd's input j now enters the pair's input 5 + j

The second item stays in the list as a NoOp without edges, so item ids (list indices) keep
their meaning for the rest of the outer schedule.
"""
from tfg.executor import plan as P
from tfg.executor.loop_pairs import enabled, pair_runner
from tfg.graphdef.names import CONTROL


def pair_loops(items, loops, pair_item):
    """Merge pairs of loop items of the outer view `items` (list indexed by id; `loops`: the
    loop items in order) that pair_runner accepts and no path joins: the first becomes
    pair_item(first, second, runner) (inputs A's then B's, outputs likewise), the second a
    NoOp without edges. Returns the loop items left (merged ones included)."""
    if not enabled() or len(loops) < 2:
        return loops
    left = list(loops)
    out = []
    while left:
        a = left.pop(0)
        for b in left:
            # (the path test first: it is cheaper than matching the two loops' cells)
            if _joined(items, a.id, b.id) or _joined(items, b.id, a.id):
                continue
            runner = pair_runner(a.fn.program, b.fn.program)
            if runner is None:
                continue
            left.remove(b)
            a = _merge_items(items, a, b, pair_item(a, b, runner))
            break
        out.append(a)
    return out


def _joined(items, src, dst):
    """Whether a path of out_edges leads from item `src` to item `dst`."""
    seen, stack = set(), [src]
    while stack:
        i = stack.pop()
        for d, _, _ in items[i].out_edges:
            if d == dst:
                return True
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return False


def _merge_items(items, a, b, merged):
    """`merged` takes a's and b's edges (b's ports and input indices shifted past a's);
    the items that fed b now feed it."""
    na, outs_a = a.num_inputs, a.num_outputs
    for it in items:
        if any(d == b.id for d, _, _ in it.out_edges):
            it.out_edges = list(dict.fromkeys(
                (a.id, port, idx if idx == CONTROL else idx + na) if d == b.id
                else (d, port, idx) for d, port, idx in it.out_edges))
    edges = list(a.out_edges)
    edges.extend((d, port + outs_a if port >= 0 else port, idx) for d, port, idx in b.out_edges)
    merged.out_edges = list(dict.fromkeys(edges))
    merged.fetch_ports = tuple(a.fetch_ports) + tuple(
        (k + outs_a, fi) for k, fi in b.fetch_ports)
    noop = P.Item(b.id, b.name, "NoOp", P.NOOP)
    noop.num_inputs = noop.num_outputs = 0
    noop.out_edges = []
    noop.fetch_ports = ()
    items[a.id] = merged
    items[b.id] = noop
    return merged
