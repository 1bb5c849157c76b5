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
"""
from dataclasses import dataclass, field
from typing import Optional

from tfg.errors import GraphValidationError
from tfg.graphdef.graph import BACK_EDGE_OPS
from tfg.graphdef.names import CONTROL, TensorRef, tensor_name
from tfg.schemas.dtypes import DType

ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
MERGE_OPS = frozenset({"Merge", "RefMerge"})
SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
NEXT_ITERATION_OPS = BACK_EDGE_OPS
LOOP_COND_OPS = frozenset({"LoopCond"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})
# Predicates are compared after looking through these (TensorFlow's cond wraps its predicate in
# an Identity `pred_id`, while the pivot Switch reads the predicate itself).
_PRED_PASSTHROUGH = frozenset({"Identity", "RefIdentity"})
_NEVER_DEAD_OPS = frozenset({"ControlTrigger"})
FALSE_BRANCH, TRUE_BRANCH = 0, 1
DEFAULT_PARALLEL_ITERATIONS = 10


@dataclass(eq=False)
class LoopVar:
    """One loop variable: Enter -> Merge -> Switch -> (Identity: body | Exit), NextIteration."""

    enter: Optional[str]
    merge: str
    switch: Optional[str]
    exit: Optional[str]
    next_iteration: Optional[str]
    identity: Optional[str] = None  # the body's first node (reads Switch:1)


@dataclass(eq=False)
class Frame:
    """A while loop's execution frame, named by its Enters' `frame_name`."""

    name: str
    parent: Optional["Frame"]
    depth: int
    enters: list = field(default_factory=list)
    constant_enters: list = field(default_factory=list)
    exits: list = field(default_factory=list)
    merges: list = field(default_factory=list)  # loop Merges, one per loop variable
    switches: list = field(default_factory=list)  # loop Switches
    next_iterations: list = field(default_factory=list)
    loop_cond: Optional[str] = None
    pivot: Optional[str] = None  # the predicate the loop Switches read (normally the LoopCond)
    parallel_iterations: int = DEFAULT_PARALLEL_ITERATIONS
    loop_vars: list = field(default_factory=list)
    nodes: set = field(default_factory=set)  # in this frame, not in child frames
    children: list = field(default_factory=list)

    def __repr__(self):
        return f"<Frame {self.name} depth={self.depth} vars={len(self.loop_vars)}>"

    def ancestors(self):
        """Enclosing frames, innermost first (self excluded)."""
        out, f = [], self.parent
        while f is not None:
            out.append(f)
            f = f.parent
        return out

    def all_nodes(self):
        """Nodes of this frame and of every frame nested in it."""
        out = set(self.nodes)
        for child in self.children:
            out |= child.all_nodes()
        return out


@dataclass(eq=False)
class CondContext:
    """A cond: Switches on one predicate in one frame, and the Merges that close it."""

    pred: str  # tensor name (`node:port`) after looking through Identity
    frame: Optional[Frame]
    switches: list = field(default_factory=list)
    merges: list = field(default_factory=list)
    outer: tuple = ()  # ((CondContext, branch), ...) enclosing this cond, outermost first
    branch_nodes: dict = field(default_factory=lambda: {FALSE_BRANCH: set(), TRUE_BRANCH: set()})

    def __repr__(self):
        return f"<CondContext pred={self.pred} switches={len(self.switches)}>"

    @property
    def true_nodes(self):
        return self.branch_nodes[TRUE_BRANCH]

    @property
    def false_nodes(self):
        return self.branch_nodes[FALSE_BRANCH]


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
    _check_primitives(graph)
    frames, frame_of = _assign_frames(graph, order)
    for frame in frames.values():
        _build_loop(graph, frame, frame_of)
    conds, cond_state = _analyze_conds(graph, order, frame_of)
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


# --- frames ---------------------------------------------------------------------------------

def _frame_name(node):
    value = node.get_attr("frame_name", None)
    if not value:
        raise GraphValidationError(f"Enter node {node.name!r} has no frame_name")
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _assign_frames(graph, order):
    frames = {}
    frame_of = {}

    def out_frame(src):
        frame = frame_of[src.name]
        if src.op in EXIT_OPS:
            return frame.parent
        return frame

    for node in order:
        # Inputs not yet assigned are NextIteration back edges (or dangling): checked below.
        srcs = [graph.get(r.node) for r in node.input_refs]
        srcs = [s for s in srcs if s is not None and s.name in frame_of]
        outer = _common_frame(node, srcs, out_frame)
        if node.op in ENTER_OPS:
            name = _frame_name(node)
            frame = frames.get(name)
            if frame is None:
                depth = 1 if outer is None else outer.depth + 1
                frame = frames[name] = Frame(name, outer, depth)
                if outer is not None:
                    outer.children.append(frame)
            elif frame.parent is not outer:
                raise GraphValidationError(
                    f"Enter {node.name!r} enters frame {name!r} from "
                    f"{_fname(outer)}, but other Enters come from {_fname(frame.parent)}")
            frame_of[node.name] = frame
        elif node.op in EXIT_OPS:
            if outer is None:
                raise GraphValidationError(
                    f"Exit {node.name!r} is not inside a while loop (no Enter leads to it)")
            frame_of[node.name] = outer
        else:
            frame_of[node.name] = outer
    # Second pass over every edge, back edges included.
    for node in order:
        if node.op in ENTER_OPS:
            continue
        srcs = [s for s in (graph.get(r.node) for r in node.input_refs) if s is not None]
        if _common_frame(node, srcs, out_frame) is not frame_of[node.name] and srcs:
            raise GraphValidationError(
                f"node {node.name!r} ({node.op}) has inputs from different frames "
                f"(it is in {_fname(frame_of[node.name])})")
    for name, frame in frame_of.items():
        if frame is not None:
            frame.nodes.add(name)
    return frames, frame_of


def _common_frame(node, srcs, out_frame):
    frame, first = None, None
    for src in srcs:
        f = out_frame(src)
        if first is None:
            frame, first = f, src
        elif f is not frame:
            raise GraphValidationError(
                f"node {node.name!r} ({node.op}) has inputs from different frames: "
                f"{first.name!r} in {_fname(frame)}, {src.name!r} in {_fname(f)}")
    return frame


def _fname(frame):
    return "the root frame" if frame is None else f"frame {frame.name!r}"


def _check_primitives(graph):
    for node in graph:
        if node.op in SWITCH_OPS and len(node.data_inputs) < 2:
            raise GraphValidationError(f"Switch {node.name!r} has no predicate input")
        if node.op in NEXT_ITERATION_OPS:
            if not any(c.op in MERGE_OPS for c, _ in graph.consumers(node.name)):
                raise GraphValidationError(
                    f"NextIteration {node.name!r} does not feed a Merge")
        if node.op in MERGE_OPS:
            _check_merge_dtypes(graph, node)


def _check_merge_dtypes(graph, merge):
    seen = None
    for ref in merge.data_inputs:
        src = graph.get(ref.node)
        dt = _output_dtype(src, ref.port) if src is not None else None
        if dt is None:
            continue
        if seen is None:
            seen = (ref, dt)
        elif dt != seen[1]:
            raise GraphValidationError(
                f"Merge {merge.name!r} joins {seen[1].tf_name} ({seen[0]}) with "
                f"{dt.tf_name} ({ref})")


def _output_dtype(node, port):
    """A node output's base dtype when cheaply known, else None (unknown ops are fine)."""
    try:
        from tfg.schemas.ops import has_op, signature

        if has_op(node.op):
            return signature.output_dtypes(node)[port].base
    except Exception:  # a malformed node is reported by whoever needs its dtype
        return None
    if node.op in MERGE_OPS and port == 1:
        return DType.INT32
    for attr in ("T", "dtype"):
        value = node.get_attr(attr, None) if node.has_attr(attr) else None
        if isinstance(value, DType):
            return value.base
    return None


def _build_loop(graph, frame, frame_of):
    in_frame = [graph[n] for n in graph.node_names() if frame_of.get(n) is frame]
    loop_merges = set()
    for node in in_frame:
        if node.op in ENTER_OPS:
            frame.enters.append(node.name)
            if node.get_attr("is_constant", False):
                frame.constant_enters.append(node.name)
        elif node.op in EXIT_OPS:
            frame.exits.append(node.name)
        elif node.op in NEXT_ITERATION_OPS:
            frame.next_iterations.append(node.name)
        elif node.op in LOOP_COND_OPS:
            if frame.loop_cond is not None:
                raise GraphValidationError(
                    f"frame {frame.name!r} has two LoopConds: {frame.loop_cond!r} and "
                    f"{node.name!r}")
            frame.loop_cond = node.name
        elif node.op in MERGE_OPS and any(
                _op_of(graph, r.node) in NEXT_ITERATION_OPS for r in node.data_inputs):
            frame.merges.append(node.name)
            loop_merges.add(node.name)
    if frame.enters:
        frame.parallel_iterations = int(
            graph[frame.enters[0]].get_attr("parallel_iterations", DEFAULT_PARALLEL_ITERATIONS))
    recv_pivot = False
    for merge in frame.merges:
        var = LoopVar(None, merge, None, None, None)
        for ref in graph[merge].data_inputs:
            op = _op_of(graph, ref.node)
            if op in ENTER_OPS and var.enter is None:
                var.enter = ref.node
            elif op in NEXT_ITERATION_OPS and var.next_iteration is None:
                var.next_iteration = ref.node
        for c, _ in graph.consumers(merge, port=0):
            if c.op in SWITCH_OPS and c.data_inputs[0].node == merge and var.switch is None:
                var.switch = c.name
                frame.switches.append(c.name)
                pred = c.data_inputs[1]
                frame.pivot = frame.pivot or frame.loop_cond or pred.node
                recv_pivot = recv_pivot or _op_of(graph, pred.node) in RECV_OPS
        if var.switch is not None:
            var.exit = _first_consumer(graph, var.switch, 0, EXIT_OPS)
            var.identity = _first_consumer(graph, var.switch, 1, None)
        frame.loop_vars.append(var)
    if frame.loop_cond is None and not recv_pivot:
        raise GraphValidationError(f"while-loop frame {frame.name!r} has no LoopCond")
    frame.pivot = frame.pivot or frame.loop_cond


def _op_of(graph, name):
    node = graph.get(name)
    return node.op if node is not None else None


def _first_consumer(graph, name, port, ops):
    for c, _ in graph.consumers(name, port=port):
        if ops is None or c.op in ops:
            return c.name
    return None


# --- conds ----------------------------------------------------------------------------------
# Each node gets a state: the (pred, branch) pairs it sits under, outermost first. A cond
# Switch's output p adds (pred, p); a Merge whose inputs disagree on a pred closes it (the
# innermost such pred); every other node joins its inputs' states (TensorFlow's
# functionalize_cond does the same).

def _canonical_pred(graph, ref):
    seen = set()
    while True:
        node = graph.get(ref.node)
        if node is None or node.op not in _PRED_PASSTHROUGH or ref.node in seen:
            return ref
        seen.add(ref.node)
        data = node.data_inputs
        if not data:
            return ref
        ref = data[0]


def _analyze_conds(graph, order, frame_of):
    conds = {}  # pred tensor name -> CondContext
    state = {}  # node -> tuple of (pred, branch)
    cond_switch = {}  # cond Switch name -> pred tensor name
    outer_state = {}  # pred tensor name -> state of its first Switch

    def is_loop_switch(node):
        data = graph.get(node.data_inputs[0].node)
        pred = graph.get(_canonical_pred(graph, node.data_inputs[1]).node)
        loop_merge = data is not None and data.op in MERGE_OPS and any(
            _op_of(graph, r.node) in NEXT_ITERATION_OPS for r in data.data_inputs)
        return loop_merge or (pred is not None and pred.op in LOOP_COND_OPS)

    def in_state(ref):
        st = state.get(ref.node)
        if st is None:
            return ()  # dangling, or a back edge not yet visited
        pred = cond_switch.get(ref.node)
        if pred is not None and ref.port in (FALSE_BRANCH, TRUE_BRANCH):
            return st + ((pred, ref.port),)
        return st

    for node in order:
        refs = node.input_refs
        if node.op in MERGE_OPS:
            data = [r for r in refs if r.port != CONTROL]
            if any(_op_of(graph, r.node) in NEXT_ITERATION_OPS for r in data):
                st = _join([in_state(r) for r in refs
                            if _op_of(graph, r.node) not in NEXT_ITERATION_OPS])
            else:
                st = _close(node, [in_state(r) for r in data],
                            [in_state(r) for r in refs if r.port == CONTROL], conds)
        elif node.op in _NEVER_DEAD_OPS:
            # Runs even when its inputs are dead, so it leaves the innermost branch it sees.
            st = _join([in_state(r) for r in refs])[:-1]
        else:
            st = _join([in_state(r) for r in refs])
        state[node.name] = st
        if node.op in SWITCH_OPS and not is_loop_switch(node):
            pred = _canonical_pred(graph, node.data_inputs[1])
            key = tensor_name(pred.node, pred.port)
            ctx = conds.get(key)
            if ctx is None:
                ctx = conds[key] = CondContext(key, frame_of.get(node.name))
                outer_state[key] = st
            ctx.switches.append(node.name)
            cond_switch[node.name] = key
    cond_state = {}
    for name, st in state.items():
        pairs = tuple((conds[p], b) for p, b in st if p in conds)
        if pairs:
            cond_state[name] = pairs
            for ctx, b in pairs:
                ctx.branch_nodes[b].add(name)
    for key, ctx in conds.items():
        ctx.outer = tuple((conds[p], b) for p, b in outer_state[key])
    return list(conds.values()), cond_state


def _join(states):
    """Union of (pred, branch) states, keeping the longest one's order (outermost first)."""
    states = [s for s in states if s]
    if not states:
        return ()
    if len(states) == 1:
        return states[0]
    states.sort(key=len, reverse=True)
    out = list(states[0])
    preds = {p for p, _ in out}
    for st in states[1:]:
        for p, b in st:
            # A second branch of a pred already present means the node can never run (its
            # inputs are never live together); the first one wins for membership purposes.
            if p not in preds:
                preds.add(p)
                out.append((p, b))
    return tuple(out)


def _close(merge, data_states, control_states, conds):
    """A cond Merge's state: its inputs' state without the innermost pred they disagree on."""
    joined = _join(data_states)
    dicts = [dict(s) for s in data_states]
    for i in range(len(joined) - 1, -1, -1):
        pred = joined[i][0]
        if len({d.get(pred) for d in dicts}) > 1:
            ctx = conds.get(pred)
            if ctx is not None:
                ctx.merges.append(merge.name)
            return _join([joined[:i]] + control_states)
    return _join([joined] + control_states)


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
           "FALSE_BRANCH", "TRUE_BRANCH", "TensorRef"]
