"""Session-time graph rewrites: what TensorFlow's DirectSession does with Grappler before it
runs a step, here for one step's subgraph (the nodes its fetches and targets need).

    >>> result = rewrite_step(graph, needed, feed_refs, fetch_refs, targets)
    >>> result.graph              # the rewritten subgraph (None: left as it was, see .skipped)
    >>> result.before, result.after, round(result.seconds, 2)     # MobileNetV2, frozen
    (1051, 164, 0.31)

    before: x=Placeholder; W, m, s Const; c=Conv2D(x, W); a=AddV2(Mul(c, Rsqrt(m)), s); y=Relu6(a)
    after:  x=Placeholder; y=_FusedConv2D(x, W', s, fused_ops=[BiasAdd, Relu6])

The pipeline, SESSION_PASSES, is the cheap part of `tfg optimize`'s: constant folding, the
affine folds into convolutions (tfg/passes/affine.py), the remapper's fusions, the
dependency optimizer and, last, CSE, one round; no arithmetic stages (they cost the most and
change little that running needs). CSE runs on the graph the other passes have shrunk (0.1 s
on NASNetMobile's 1,163 nodes, against 1-2 s for the rest): Keras's NASNet applies
Activation('relu') and the same pooling to one tensor in several branches of a cell, 76
duplicate nodes (Relu, AvgPool, MaxPool) a step ran twice. Before them, three linear sweeps: control edges from
Const/Identity dropped, Identity(Const) and IdentityN forwarded (loop- and cond-free graphs). What it keeps exactly, as TensorFlow does: fed tensors
become Placeholders of the same name (their producers are not run), fetched and targeted
nodes keep their names and outputs, stateful ops (variables, queues, random ops, assigns)
are never folded or removed, control flow is rewritten only by passes that keep its
semantics. Values change only by float rounding (a batch norm's scale folded into the
filter rounds once where the graph rounded twice).

Skipped (the step runs the graph as given, `.skipped` says why): a subgraph above
MAX_NODES nodes (the passes are roughly linear but cost ~0.1-0.4 ms of CPU a node, so a
100,000-node graph would pay tens of seconds per distinct request), a feed of a non-zero output port or of a
node the step also needs, and graphs whose nodes talk through _Send/_Recv.
"""
import time
from dataclasses import dataclass, field

from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.passes.manager import optimize
from tfg.passes.rewrite import FRAME_OPS, PLACEHOLDERS
from tfg.schemas.ops import control_flow_names
from tfg.schemas.ops.signature import output_dtypes

SESSION_PASSES = ("constfold", "affine", "remap", "dependency", "cse")
MAX_NODES = 20000
_COMM_OPS = control_flow_names("send", "recv")


@dataclass
class StepRewrite:
    """What `rewrite_step` did: the new graph (None when skipped), sizes, time, per-pass rows
    (as `optimize(report=...)` gives them) and why it was skipped."""

    graph: object = None
    before: int = 0
    after: int = 0
    seconds: float = 0.0
    passes: list = field(default_factory=list)
    skipped: str = ""

    def summary(self):
        """One line: 'graph rewrites: 1051 -> 164 nodes in 0.31 s (constfold 1052->443, ...)'
        or why they were skipped."""
        if self.skipped:
            return f"graph rewrites skipped: {self.skipped}"
        steps = ", ".join(f"{r['pass']} {r['before']}->{r['after']}"
                          + (f" [rolled back: {r['error']}]" if r["error"] else "")
                          for r in self.passes)
        return (f"graph rewrites: {self.before} -> {self.after} nodes in {self.seconds:.2f} s "
                f"({steps})")


def rewrite_step(graph, needed, feed_refs, fetch_refs, targets=(), passes=SESSION_PASSES,
                 max_nodes=None):
    """Rewrite the subgraph of `graph` made of the `needed` node names (see module doc)."""
    start = time.perf_counter()
    max_nodes = MAX_NODES if max_nodes is None else max_nodes
    result = StepRewrite(before=len(needed))
    why = _why_not(graph, needed, feed_refs, max_nodes)
    if why:
        result.skipped = why
        return result
    sub = _subgraph(graph, needed, feed_refs)
    keep = sorted({r.node for r in fetch_refs} | {t.lstrip("^") for t in targets})
    fed = sorted({r.node for r in feed_refs})
    _drop_pure_controls(sub)
    _forward_const_identities(sub, {r.node for r in feed_refs} | set(keep))
    _forward_identity_n(sub, {r.node for r in feed_refs} | set(keep))
    # tfg_kernels: tfg runs the result, so fusions only tfg has kernels for are fine.
    result.graph = optimize(sub, passes=list(passes), keep=keep, feeds=fed, rounds=1,
                            report=result.passes, extra={"tfg_kernels": True})
    result.after = len(result.graph)
    result.seconds = time.perf_counter() - start
    return result


def _why_not(graph, needed, feed_refs, max_nodes):
    if len(needed) > max_nodes:
        return f"{len(needed)} nodes, above the limit of {max_nodes}"
    for ref in feed_refs:
        if ref.port != 0:
            return f"feeds output {ref.port} of {ref.node!r}"
        if ref.node in needed:
            return f"the step both feeds and runs {ref.node!r}"
        if len(output_dtypes(graph[ref.node])) != 1:
            return f"feeds {ref.node!r}, which has several outputs"
    if any(graph[name].op in _COMM_OPS for name in needed):
        return "the graph is partitioned (_Send/_Recv)"
    return ""


def _drop_pure_controls(graph):
    """Drop control edges from Const and Identity nodes in a graph without conds or loops.

    before: out = Identity(y, ^NoOp); NoOp(^read_1, ..., ^read_1126)   (read_i = Identity(Const))
    after:  out = Identity(y, ^NoOp); NoOp()

    Such an edge only orders the step: neither op has an effect or can fail, and without a
    Switch nothing can be dead. What TensorFlow's tf.function freezes into a model (a NoOp
    waiting on every variable read) made the Identity bypasses quadratic: each edited the
    NoOp's thousand inputs.
    """
    if any(n.op in FRAME_OPS for n in graph):
        return
    pure = {n.name for n in graph if n.op in ("Const", "Identity")}
    for node in graph:
        ins = node.inputs
        if any(i.startswith("^") and i[1:] in pure for i in ins):
            node.inputs = [i for i in ins if not (i.startswith("^") and i[1:] in pure)]


def _forward_const_identities(graph, preserved):
    """Consumers of Identity(Const) (and chains of them) read the Const.

    before: w = Const; r = Identity(w); c = Conv2D(x, r)      after: c = Conv2D(x, w)

    Frozen models read every weight through such an Identity (a former ReadVariableOp);
    constant folding would copy each weight into a new Const, here it is one linear sweep. The
    Identity nodes stay for what waits on them (control edges, fetches) and otherwise go as
    dead. Only Consts on the Identity's device, and Identities without control inputs.
    """
    source = {}  # Identity name -> the Const it forwards
    for node in graph.topo_order():
        if node.op != "Identity" or node.name in preserved or node.control_inputs:
            continue
        ref = node.input_refs[0] if node.input_refs else None
        if ref is None or ref.port != 0:
            continue
        src = graph.get(ref.node)
        if src is None or src.device != node.device or src.name in preserved:
            continue
        if src.op == "Const":
            source[node.name] = src.name
        elif src.name in source:
            source[node.name] = source[src.name]
    if not source:
        return
    source.update({name + ":0": const for name, const in list(source.items())})
    for node in graph:
        ins = node.inputs
        if any(i in source for i in ins):
            node.inputs = [source.get(i, i) for i in ins]


def _forward_identity_n(graph, preserved):
    """Readers of IdentityN:k read the IdentityN's k-th input.

    before: a = IdentityN(mul, x, beta); y = Conv2D(a:0, W)      after: y = Conv2D(mul, W)

    Keras's swish (a tf.custom_gradient) ends in such an IdentityN; reading through it hid
    x * sigmoid(x) from the remapper. Only IdentityN nodes without control inputs, on the
    device of the input forwarded, and outside loops and conds (a frame's values stay where
    its ops put them).
    """
    if any(n.op in FRAME_OPS for n in graph):
        return
    source = {}  # "name:k" (and "name" for k = 0) -> the input string it forwards
    for node in graph.topo_order():
        if node.op != "IdentityN" or node.name in preserved or node.control_inputs:
            continue
        for k, ref in enumerate(node.input_refs):
            src = graph.get(ref.node)
            if src is None or src.device != node.device:
                continue
            text = node.inputs[k]
            text = source.get(text, text)
            source[f"{node.name}:{k}"] = text
            if k == 0:
                source[node.name] = text
    if not source:
        return
    for node in graph:
        ins = node.inputs
        if any(i in source for i in ins):
            node.inputs = [source.get(i, i) for i in ins]


def _subgraph(graph, needed, feed_refs):
    """A new Graph of the needed nodes (copied, in file order) plus one Placeholder per fed
    node, named as it (a Placeholder stays as it is)."""
    sub = Graph()
    sub.versions.CopyFrom(graph.versions)
    sub.library = graph.library
    fed = {r.node for r in feed_refs}
    for node in graph:
        name = node.name
        if name in needed:
            sub.add(node.copy())
        elif name in fed:
            if node.op == "Placeholder":
                sub.add(node.copy())
                continue
            attrs = {"dtype": output_dtypes(node)[0].base}
            shape = node.get_attr("shape", None) if node.op in PLACEHOLDERS else None
            if shape is not None:  # else: unknown rank
                attrs["shape"] = Shape(shape)
            sub.add_node(name, "Placeholder", [], attrs, node.device)
    return sub
