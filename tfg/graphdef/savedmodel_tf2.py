"""TF2 SavedModels (tf.saved_model.save): function calls inlined, resource variables restored.

A TF2 SavedModel's main graph is a shell: placeholders (`serving_default_x`), one VarHandleOp
per variable, and StatefulPartitionedCall nodes calling functions of the graph's library (the
signatures, the saver's save and restore functions). At load time tfg inlines the calls
(tfg.graphdef.functions), so the signature outputs (`StatefulPartitionedCall:0`) are computed
by plain nodes. The variables are restored the way TensorFlow's loader does it: by running the
MetaGraphDef's saver restore op (`saver_def.restore_op_name`, the inlined
`__inference__traced_restore` call: RestoreV2 -> AssignVariableOp on each VarHandleOp), with
the RestoreV2 outputs fed from the tensor bundle tfg decoded (keys such as
`l1/w/.ATTRIBUTES/VARIABLE_VALUE`, the object graph's checkpoint keys):

    >>> info = saver_def(meta_graph)
    {'filename_tensor_name': 'saver_filename:0', 'restore_op_name': 'StatefulPartitionedCall_2'}
    >>> restore_resource_variables(sess, graph, read_variables("export/tf2"))
    ['l1/b/.ATTRIBUTES/VARIABLE_VALUE', 'l1/w/.ATTRIBUTES/VARIABLE_VALUE', ...]
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.names import parse_input
from tfg.graphdef.object_graph import capture_keys, handle_source
from tfg.graphdef.state_checks import check_value
from tfg.schemas.wire import message_fields

_SAVER_FIELDS = {1: "filename_tensor_name", 2: "save_tensor_name", 3: "restore_op_name"}


def unmodelled_fields(meta_graph, numbers=(3, 7)):
    """{field number: [bytes]} of the MetaGraphDef fields tfg's schema does not model (3: the
    SaverDef, 7: the SavedObjectGraph); they survive as unknown fields, read off the wire."""
    out = {}
    for number, value in message_fields(meta_graph.SerializeToString(), "MetaGraphDef"):
        if number in numbers and isinstance(value, bytes):
            out.setdefault(number, []).append(value)
    return out


def saver_def(meta_graph, fields=None):
    """{filename_tensor_name, save_tensor_name, restore_op_name} of a MetaGraphDef's SaverDef
    (field 3), or {} without one; `fields` are its `unmodelled_fields` when already read.

    SaverDef fields 1-3 are length-delimited strings.
    """
    out = {}
    for value in (unmodelled_fields(meta_graph) if fields is None else fields).get(3, []):
        for sub, sval in message_fields(value, "MetaGraphDef"):
            if sub in _SAVER_FIELDS and isinstance(sval, bytes):
                out[_SAVER_FIELDS[sub]] = sval.decode("utf-8", "replace")
    return out


def ancestors(graph, names):
    """Every node the given node names depend on (data and control), themselves included."""
    seen, stack = set(), [n for n in names if n in graph]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(r.node for r in graph[name].input_refs if r.node in graph)
    return seen


def check_inlined(graph, node_names, what):
    """Refuse to run `node_names` when they depend on a call tfg could not inline.

    Before: fetches ['StatefulPartitionedCall:0'] whose function holds an `If`.
    After:  TfgInputError("signature output 'y' needs node 'StatefulPartitionedCall/cond',
            which tfg could not inline: function 'f' node 'cond': op If is control flow v2 ...")
    """
    info = getattr(graph, "saved_model", None)
    skipped = (info.functions or {}).get("not_inlined", {}) if info is not None else {}
    if not skipped:
        return
    needed = ancestors(graph, node_names)
    for call in sorted(skipped):
        if call in needed:
            raise TfgInputError(f"{what} needs node {call!r}, which tfg could not inline: "
                                f"{skipped[call]}")


def restore_resource_variables(session, graph, values):
    """Run the SavedModel's restore op with RestoreV2's outputs fed from `values`.

    Before: a Session of an inlined TF2 SavedModel graph; resource variables unset.
    After:  each VarHandleOp's variable holds its checkpoint value; returns the checkpoint keys
            restored, sorted.
    """
    info = graph.saved_model
    op = (info.saver or {}).get("restore_op_name")
    filename = (info.saver or {}).get("filename_tensor_name")
    if not op or parse_input(op).node not in graph:
        raise TfgInputError(f"{info.path}: the graph has resource variables (VarHandleOp) but "
                            "no saver restore op to restore them with")
    op = parse_input(op).node
    check_inlined(graph, [op], "restoring the variables")
    feeds = {}
    restored = []
    for name in sorted(ancestors(graph, [op])):
        node = graph[name]
        if node.op != "RestoreV2":
            continue
        keys = _const_strings(graph, node, 1, "tensor_names")
        slices = _const_strings(graph, node, 2, "shape_and_slices")
        if any(slices):
            raise TfgInputError(f"node {name!r}: restoring slices of partitioned variables is "
                                "not supported")
        for i, key in enumerate(keys):
            if key not in values:
                raise TfgInputError(f"node {name!r} restores {key!r}, which "
                                    f"{info.path}/variables does not hold")
            check_value(key, values[key], _restored_dtype(node, i),
                        _assigned_shape(graph, name, i), f"{info.path}/variables")
            feeds[f"{name}:{i}"] = values[key]
            if graph.consumers(name, port=i):  # not the object graph, read but never assigned
                restored.append(key)
    if not feeds:
        raise TfgInputError(f"{info.path}: the restore op {op!r} reads no RestoreV2 tensors")
    if filename and parse_input(filename).node in graph:
        feeds[filename] = np.array(info.variables_prefix or "", dtype=object)
    feeds.update(asset_feeds(graph))
    session.run(None, feeds=feeds, targets=[op])
    return sorted(restored)


def asset_feeds(graph):
    """The feeds TensorFlow's loader gives the restore and init ops: each asset's tensor the
    path of its file under assets/ (only those the graph still has)."""
    info = graph.saved_model
    return {name: np.array(path.encode(), dtype=object)
            for name, path in (info.assets or {}).items() if parse_input(name).node in graph}


def run_init_ops(session, graph):
    """Run what TF's loader runs after restoring (table initializers, ...), assets fed; returns
    the node names run.

    Before: a Session of a SavedModel whose HashTableV2 is empty.
    After:  its `__saved_model_init_op` (or TF1's main op / legacy init op) has run, so the
            table holds its vocabulary.
    """
    names = [n for n in (graph.saved_model.init_ops or []) if n in graph]
    if names:
        check_inlined(graph, names, "the SavedModel's init op")
        session.run(None, feeds=asset_feeds(graph), targets=names)
    return names


def unrestored_captures(graph, values):
    """{VarHandleOp name: checkpoint key} of the variables the SavedModel's functions capture
    but its saver's restore op does not assign, each keyed as TensorFlow's TF2 loader keys it:
    through the object graphs (tfg.graphdef.object_graph).

    Before: a Keras 3 train step: StatefulPartitionedCall captures `adam/w_velocity`, the
            restore op assigns its saver copy `Variable_3` only.
    After:  {'adam/w_velocity': 'opt/_variables/3/.ATTRIBUTES/VARIABLE_VALUE', ...}
    """
    info = graph.saved_model
    keys = capture_keys(info.objects, values)
    op = parse_input((info.saver or {}).get("restore_op_name") or "").node
    assigned = {handle_source(graph, graph[name].data_inputs[0].node)
                for name in (ancestors(graph, [op]) if op in graph else ())
                if graph[name].op == "AssignVariableOp" and graph[name].data_inputs}
    out = {}
    for handle, key in sorted(keys.items()):
        if handle in graph and handle not in assigned:
            if key not in values:
                raise TfgInputError(f"variable {handle!r} is restored from {key!r}, which "
                                    f"{info.path}/variables does not hold")
            out[handle] = key
    return out


def _restored_dtype(node, i):
    dtypes = node.get_attr("dtypes", None) or []
    return dtypes[i] if i < len(dtypes) else None


def _assigned_shape(graph, name, port):
    """The declared shape of the variable RestoreV2 output `port` is assigned to (through
    Identity), or None when no VarHandleOp with a shape receives it."""
    frontier = [n for n, _ in graph.consumers(name, port=port)]
    for _ in range(8):  # Identity chains are short; a longer walk finds nothing more
        nxt = []
        for node in frontier:
            if node.op == "AssignVariableOp" and node.data_inputs:
                handle = graph.get(node.data_inputs[0].node)
                if handle is not None and handle.op == "VarHandleOp":
                    return handle.get_attr("shape", None)
            elif node.op == "Identity":
                nxt += [n for n, _ in graph.consumers(node.name, port=0)]
        frontier = nxt
    return None


def _const_strings(graph, node, index, what):
    refs = node.data_inputs
    if len(refs) <= index:
        raise TfgInputError(f"node {node.name!r} ({node.op}) lacks its {what} input")
    src = graph.get(refs[index].node)
    while src is not None and src.op == "Identity" and src.data_inputs:
        src = graph.get(src.data_inputs[0].node)
    if src is None or src.op != "Const":
        raise TfgInputError(f"node {node.name!r}: its {what} are not a constant, so tfg cannot "
                            "tell which checkpoint keys it restores")
    value = np.asarray(src.get_attr("value")).reshape(-1)
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in value.tolist()]
