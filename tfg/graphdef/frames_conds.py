"""Conds of an existing graph: the Switches on one predicate, the Merges that close them, and
the (cond, branch) pairs every node sits under. Part of `tfg.graphdef.frames` (use
`frames.analyze`, not this module).

    >>> conds, state = analyze_conds(graph, graph.topo_order(), frame_of)
    >>> [(c.pred, [n for n in sorted(c.true_nodes)]) for c in conds]
    [('Less:0', ['cond/Add', 'cond/Switch_1'])]

Each node gets a state: the (pred, branch) pairs it sits under, outermost first. A cond
Switch's output p adds (pred, p); a Merge whose inputs disagree on a pred closes it (the
innermost such pred); every other node joins its inputs' states (TensorFlow's
functionalize_cond does the same). Branches are numbered like the Switch outputs that open
them: 0 false, 1 true.
"""
from dataclasses import dataclass, field
from typing import Optional

from tfg.graphdef.frames_loops import (
    LOOP_COND_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS, Frame, op_of)
from tfg.graphdef.names import CONTROL, tensor_name

FALSE_BRANCH, TRUE_BRANCH = 0, 1
# Predicates are compared after looking through these (TensorFlow's cond wraps its predicate in
# an Identity `pred_id`, while the pivot Switch reads the predicate itself).
_PRED_PASSTHROUGH = frozenset({"Identity", "RefIdentity"})
_NEVER_DEAD_OPS = frozenset({"ControlTrigger"})


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


def canonical_pred(graph, ref):
    """The predicate tensor `ref` reads, looking through Identity (cycles stop the walk)."""
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


def analyze_conds(graph, order, frame_of):
    """([CondContext], {node: ((pred, branch), ...)}) of `graph`, nodes in topological order."""
    conds = {}  # pred tensor name -> CondContext
    state = {}  # node -> tuple of (pred, branch)
    cond_switch = {}  # cond Switch name -> pred tensor name
    outer_state = {}  # pred tensor name -> state of its first Switch

    def is_loop_switch(node):
        data = graph.get(node.data_inputs[0].node)
        pred = graph.get(canonical_pred(graph, node.data_inputs[1]).node)
        loop_merge = data is not None and data.op in MERGE_OPS and any(
            op_of(graph, r.node) in NEXT_ITERATION_OPS for r in data.data_inputs)
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
            if any(op_of(graph, r.node) in NEXT_ITERATION_OPS for r in data):
                st = _join([in_state(r) for r in refs
                            if op_of(graph, r.node) not in NEXT_ITERATION_OPS])
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
            pred = canonical_pred(graph, node.data_inputs[1])
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


