"""While-loop frames of an existing graph: which frame every node runs in, and each frame's
loop variables. Part of `tfg.graphdef.frames` (use `frames.analyze`, not this module).

    >>> frames, frame_of = assign_frames(graph, graph.topo_order())
    >>> frame_of["while/add"].name
    'while/while_context'
    >>> build_loop(graph, frames["while/while_context"], frame_of)
    >>> frames["while/while_context"].loop_vars[0].exit
    'while/Exit'

The control-flow attrs of Enter (`frame_name`, `is_constant`, `parallel_iterations`) are read
through `control_attr`, which checks the AttrValue's kind first: a hand-made or fuzzed file can
hold a tensor there, and a numpy array in an `if` is a crash, not a message naming the node.
"""
from dataclasses import dataclass, field
from typing import Optional

from tfg.errors import GraphValidationError
from tfg.graphdef import attrs as attrcodec
from tfg.graphdef.graph import BACK_EDGE_OPS
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, has_op, signature

ENTER_OPS = control_flow_names("enter")
EXIT_OPS = control_flow_names("exit")
MERGE_OPS = control_flow_names("merge")
SWITCH_OPS = control_flow_names("switch")
NEXT_ITERATION_OPS = BACK_EDGE_OPS
LOOP_COND_OPS = control_flow_names("loop_cond")
RECV_OPS = control_flow_names("recv")
DEFAULT_PARALLEL_ITERATIONS = 10

# AttrValue field -> how a message names it.
_KIND_WORDS = {"s": "a string", "b": "a bool", "i": "an int", "f": "a float", "type": "a type",
               "shape": "a shape", "tensor": "a tensor", "func": "a function"}


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


def control_attr(node, name, kind, default):
    """`node`'s attr `name` decoded, or `default` when absent; GraphValidationError naming the
    node when the AttrValue holds another kind than `kind` ('s', 'b', 'i', 'type').

    Before: Enter 'e' with `frame_name { tensor {...} }`.
    After:  GraphValidationError("Enter 'e': attr 'frame_name' must be a string, but the
            AttrValue holds a tensor").
    """
    if not node.has_attr(name):
        return default
    have = attrcodec.kind_of(node.attr[name])
    if have != kind:
        raise GraphValidationError(
            f"{node.op} {node.name!r}: attr {name!r} must be {_KIND_WORDS.get(kind, kind)}, "
            f"but the AttrValue holds {_KIND_WORDS.get(have, 'a ' + have) if have else 'nothing'}")
    return node.get_attr(name)


def frame_name(node):
    """An Enter's frame name as text; an input error when it is missing, empty or not UTF-8.

    Non-UTF-8 bytes are refused rather than replaced: the partitioner writes the name back
    into new Enters, and a replaced character would name another frame.
    """
    value = control_attr(node, "frame_name", "s", b"")
    if not value:
        raise GraphValidationError(f"Enter node {node.name!r} has no frame_name")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphValidationError(
            f"Enter node {node.name!r}: frame_name {value[:60]!r} is not UTF-8") from None


def is_constant(node):
    return control_attr(node, "is_constant", "b", False)


def parallel_iterations(node):
    # Values below 1 are kept as written: the executor runs them as 1, as TensorFlow's does.
    return control_attr(node, "parallel_iterations", "i", DEFAULT_PARALLEL_ITERATIONS)


# --- frames ---------------------------------------------------------------------------------

def assign_frames(graph, order):
    """({frame name: Frame}, {node name: Frame or None}) for nodes in topological `order`."""
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
            name = frame_name(node)
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


def check_primitives(graph):
    """Switches with a predicate, NextIterations into a Merge, Merges of one dtype."""
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
        if has_op(node.op):
            return signature.output_dtypes(node)[port].base
    except Exception:  # a malformed node is reported by whoever needs its dtype
        return None
    if node.op in MERGE_OPS and port == 1:
        return DType.INT32
    for attr in ("T", "dtype"):
        # Only a `type` AttrValue is a dtype; anything else says nothing here.
        if node.has_attr(attr) and attrcodec.kind_of(node.attr[attr]) == "type":
            return node.get_attr(attr).base
    return None


# --- loop variables ---------------------------------------------------------------------------

def build_loop(graph, frame, frame_of):
    """Fill `frame`'s Enters, Exits, Merges, Switches, LoopCond and loop variables."""
    in_frame = [graph[n] for n in graph.node_names() if frame_of.get(n) is frame]
    for node in in_frame:
        if node.op in ENTER_OPS:
            frame.enters.append(node.name)
            if is_constant(node):
                frame.constant_enters.append(node.name)
            # Checked on every Enter, so that a bad one is named whichever comes first.
            pi = parallel_iterations(node)
            if len(frame.enters) == 1:
                frame.parallel_iterations = pi
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
                op_of(graph, r.node) in NEXT_ITERATION_OPS for r in node.data_inputs):
            frame.merges.append(node.name)
    recv_pivot = False
    for merge in frame.merges:
        var = LoopVar(None, merge, None, None, None)
        for ref in graph[merge].data_inputs:
            op = op_of(graph, ref.node)
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
                recv_pivot = recv_pivot or op_of(graph, pred.node) in RECV_OPS
        if var.switch is not None:
            var.exit = _first_consumer(graph, var.switch, 0, EXIT_OPS)
            var.identity = _first_consumer(graph, var.switch, 1, None)
        frame.loop_vars.append(var)
    if frame.loop_cond is None and not recv_pivot:
        raise GraphValidationError(f"while-loop frame {frame.name!r} has no LoopCond")
    frame.pivot = frame.pivot or frame.loop_cond


def op_of(graph, name):
    node = graph.get(name)
    return node.op if node is not None else None


def _first_consumer(graph, name, port, ops):
    for c, _ in graph.consumers(name, port=port):
        if ops is None or c.op in ops:
            return c.name
    return None
