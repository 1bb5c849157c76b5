"""Variables that live on TensorFlow servers: read, saved and restored by running small
graphs there (a TensorFlow worker has no call that hands out its variables).

    >>> collect(sess)          # ResourceMgr of every initialized variable, read on its server
    >>> save(sess, "ckpt/", step=100); restore(sess, "ckpt/")

Beside each variable node of the session's graph (same device) the helpers add:

Before: v (VariableV2, task 1)                  h (VarHandleOp, task 0)
After:  v/_tfg_is_init (IsVariableInitialized)  h/_tfg_is_init (VarIsInitializedOp)
                                                h/_tfg_read (ReadVariableOp)
        v/_tfg_value (Placeholder) -> v/_tfg_assign (Assign), likewise AssignVariableOp

Reading is two steps: which variables are initialized, then their values (a ref variable is
fetched directly). Restoring is one step feeding each value to its assign. The checkpoint is
tfg's own format (tfg/executor/checkpoint.py), so `--checkpoint-dir` resumes a run on either
engine.
"""
from tfg.executor import checkpoint
from tfg.executor.step import StepRequest
from tfg.graphdef.names import TensorRef
from tfg.kernels.resources import Ref, ResourceMgr
from tfg.schemas.dtypes import DType


def _var_nodes(graph):
    return [n for n in graph if n.op in checkpoint.VARIABLE_OPS]


def _key(node):
    container = node.get_attr("container", b"").decode()
    return container, node.get_attr("shared_name", b"").decode() or node.name


def helper_graph(graph):
    """A copy of `graph` with the helper nodes of the module docstring."""
    out = graph.copy()
    for node in _var_nodes(graph):
        dtype = node.get_attr("dtype")
        base = dtype.base if isinstance(dtype, DType) else dtype
        add = lambda suffix, op, inputs, attrs: out.add_node(  # noqa: E731
            f"{node.name}/_tfg_{suffix}", op, inputs, attrs, node.device)
        add("value", "Placeholder", [], {"dtype": base})
        if node.op == "VarHandleOp":
            add("is_init", "VarIsInitializedOp", [node.name], {})
            add("read", "ReadVariableOp", [node.name], {"dtype": base})
            add("assign", "AssignVariableOp", [node.name, f"{node.name}/_tfg_value"],
                {"dtype": base})
        else:
            add("is_init", "IsVariableInitialized", [node.name], {"dtype": base})
            add("assign", "Assign", [node.name, f"{node.name}/_tfg_value"],
                {"T": base, "validate_shape": False, "use_locking": True})
    return out


def _run(sess, fetches, feeds=None, targets=()):
    request = StepRequest([TensorRef(f, 0) for f in fetches], None,
                          tuple(TensorRef(k, 0) for k in (feeds or {})),
                          list((feeds or {}).values()), tuple(targets))
    return sess.run_helper(request)


def collect(sess):
    """ResourceMgr of every initialized variable, each read on the server that holds it."""
    nodes = _var_nodes(sess.graph)
    mgr = ResourceMgr()
    if not nodes:
        return mgr
    flags = _run(sess, [f"{n.name}/_tfg_is_init" for n in nodes])
    live = [n for n, f in zip(nodes, flags) if bool(f)]
    if not live:
        return mgr
    values = _run(sess, [f"{n.name}/_tfg_read" if n.op == "VarHandleOp" else n.name
                         for n in live])
    for node, value in zip(live, values):
        container, name = _key(node)
        mgr.get_or_create(container, name, lambda n=name: Ref(n)).assign(value)
    return mgr


def save(sess, directory, step=None):
    return checkpoint.save(collect(sess), directory, step=step, graph=sess.graph)


def saved_step(sess, directory):
    return checkpoint.saved_step(directory, sess.graph)


def restore(sess, directory):
    """Read the checkpoint here and assign each variable on its server (one step)."""
    mgr = ResourceMgr()
    names = checkpoint.restore(mgr, sess.graph, directory)
    assign(sess, {key: (ref.get(), None, None) for key, ref in mgr.items()})
    return names


def assign(sess, values):
    """Set each variable ({(container, name): (array, dtype, shape)}) on its server, in one
    step of the graph's assign nodes; values for no variable of this graph are skipped."""
    by_key = {_key(n): n for n in _var_nodes(sess.graph)}
    feeds, targets = {}, []
    for key, (value, _, _) in values.items():
        node = by_key.get(key)
        if node is None:
            continue  # saved, but not a variable of this graph: nothing holds it
        feeds[f"{node.name}/_tfg_value"] = value
        targets.append(f"{node.name}/_tfg_assign")
    if targets:
        _run(sess, [], feeds, targets)
