"""Control-flow structure of an existing graph: v1 while-loop frames, loop variables and conds.

A GraphDef keeps no WhileContext/CondContext once TensorFlow exported it; this module rebuilds
them from the five primitives, the way TensorFlow's own `BuildControlFlowInfo` and
`functionalize_cond` do.

    >>> info = analyze(load("nested_while.pb"))
    >>> f = info.frame_of("while/while/add")
    >>> f.name, f.parent.name, f.depth
    ('while/while/while_context', 'while/while_context', 2)
    >>> [v.merge for v in f.loop_vars]
    ['while/while/Merge', 'while/while/Merge_1']
    >>> info = analyze(load("cond.pb"))
    >>> [(c.pred, b) for c, b in info.cond_branch_of("cond/Add")]
    [('Less:0', 1)]

Frame membership follows TensorFlow: an Enter and an Exit are inside the loop's frame; the
Enter's outputs are in that frame, the Exit's outputs in the parent. Every other node is in the
frame of its inputs (data and control); a node without inputs is in the root frame (None).
Branches are numbered like the Switch outputs that open them: 0 false, 1 true.

The work is split: frames_loops.py (frames, loop variables, the checked reading of Enter
attrs) and frames_conds.py (conds); this module joins them and is the public API.
"""
from tfg.graphdef.frames_conds import (  # noqa: F401  (re-exported)
    FALSE_BRANCH, TRUE_BRANCH, CondContext, analyze_conds, canonical_pred)
from tfg.graphdef.frames_loops import (  # noqa: F401  (re-exported)
    DEFAULT_PARALLEL_ITERATIONS, ENTER_OPS, EXIT_OPS, LOOP_COND_OPS, MERGE_OPS,
    NEXT_ITERATION_OPS, RECV_OPS, SWITCH_OPS, Frame, LoopVar, assign_frames, build_loop,
    check_primitives, control_attr)
from tfg.graphdef.names import TensorRef

_canonical_pred = canonical_pred  # the name tests and older callers use


class ControlFlowInfo:
    """The result of `analyze`: frames by name, conds, and per-node lookups."""

    def __init__(self, frames, frame_of, conds, cond_state):
        self.frames = frames
        self.conds = conds
        self._frame_of = frame_of
        self._cond_state = cond_state

    def frame_of(self, node_name):
        """The Frame the node runs in; None for the root frame (or an unknown name)."""
        return self._frame_of.get(node_name)

    def cond_branch_of(self, node_name):
        """[(CondContext, branch)] enclosing the node, outermost first."""
        return list(self._cond_state.get(node_name, ()))

    @property
    def root_frames(self):
        return [f for f in self.frames.values() if f.parent is None]

    def loop_var_of(self, node_name):
        """The LoopVar that `node_name` is one of the primitives of, or None."""
        frame = self.frame_of(node_name)
        for v in frame.loop_vars if frame else ():
            if node_name in (v.enter, v.merge, v.switch, v.exit, v.next_iteration):
                return v
        return None


def analyze(graph):
    """Rebuild frames, loop variables and conds of `graph`.

    Before: a GraphDef with Enter/Merge/Switch/NextIteration/Exit/LoopCond nodes.
    After:  `info.frames['while/while_context'].loop_vars[0].exit == 'while/Exit'`,
            `info.frame_of('while/add').name == 'while/while_context'`.
    Raises GraphValidationError naming the node for malformed control flow.
    """
    order = graph.topo_order()
    check_primitives(graph)
    frames, frame_of = assign_frames(graph, order)
    for frame in frames.values():
        build_loop(graph, frame, frame_of)
    conds, cond_state = analyze_conds(graph, order, frame_of)
    # Report everything in file order, not in the topological order it was found in.
    pos = {name: i for i, name in enumerate(graph.node_names())}
    first = lambda names: min((pos[n] for n in names), default=len(pos))  # noqa: E731
    frames = dict(sorted(frames.items(), key=lambda kv: first(kv[1].enters)))
    for frame in frames.values():
        frame.children.sort(key=lambda f: first(f.enters))
    for ctx in conds:
        ctx.switches.sort(key=pos.get)
        ctx.merges.sort(key=pos.get)
    conds.sort(key=lambda c: first(c.switches))
    return ControlFlowInfo(frames, frame_of, conds, cond_state)


def frame_summary(info):
    """Frames as plain data (for `tfg info` and JSON), parents before children.

    Before: analyze(graph) of a nested loop.  After: [{'name': 'while/while_context',
    'parent': None, 'depth': 1, 'loop_vars': 2, ...}, {'name': 'while/while/while_context', ...}]
    """
    out = []

    def visit(frame):
        out.append({
            "name": frame.name,
            "parent": frame.parent.name if frame.parent else None,
            "depth": frame.depth,
            "loop_vars": len(frame.loop_vars),
            "parallel_iterations": frame.parallel_iterations,
            "loop_cond": frame.loop_cond,
            "enters": len(frame.enters),
            "constant_enters": len(frame.constant_enters),
            "exits": len(frame.exits),
            "nodes": len(frame.nodes),
            "children": [c.name for c in frame.children],
        })
        for child in frame.children:
            visit(child)

    for frame in info.root_frames:
        visit(frame)
    return out


__all__ = ["analyze", "ControlFlowInfo", "Frame", "LoopVar", "CondContext", "frame_summary",
           "control_attr", "FALSE_BRANCH", "TRUE_BRANCH", "TensorRef"]
