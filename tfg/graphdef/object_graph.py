"""A TF2 SavedModel's object graph: which variable each captured handle is, and its checkpoint key.

tf.saved_model.save writes two graphs of the same Python objects: the MetaGraphDef's
SavedObjectGraph (field 7: what to rebuild, and for each concrete function `bound_inputs`, the
object node of each captured input) and the checkpoint's TrackableObjectGraph (the bundle's
`_CHECKPOINTABLE_OBJECT_GRAPH`: for each object its tensors' checkpoint keys). TensorFlow's TF2
loader restores through them, not through the saver's restore function: it pairs the two graphs
from their roots by child names (and optimizer slots by their references), so a function reads
the value the checkpoint holds for the object it captured. Keras 3 depends on that: it exports a
second copy of each variable (`Variable_N`) for the saver, which the functions never read.

    >>> objects = saved_objects(meta_graph)               # at load time, before inlining
    >>> objects.captures                                  # main-graph handle -> object node
    {'adam/dense_kernel_velocity': 42, 'sequential/dense/kernel': 17, ...}
    >>> capture_keys(objects, read_variables("export/tf2"))
    {'adam/dense_kernel_velocity': 'opt/_variables/5/.ATTRIBUTES/VARIABLE_VALUE', ...}
"""
from dataclasses import dataclass, field

from tfg.errors import TfgInputError
from tfg.graphdef.functions import CALL_OPS
from tfg.schemas.wire import message_fields, read_varint

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VALUE_ATTRIBUTE = "VARIABLE_VALUE"
_VARIABLE_KIND = 7  # SavedObject.variable


@dataclass
class ObjectNode:
    """One node of either object graph: named children, slot references, checkpoint keys."""

    children: dict = field(default_factory=dict)  # local name -> node id
    slots: dict = field(default_factory=dict)  # (original variable id, slot name) -> slot id
    keys: dict = field(default_factory=dict)  # attribute name -> checkpoint key (checkpoint)
    is_variable: bool = False  # a SavedVariable (SavedObjectGraph)


@dataclass
class SavedObjects:
    nodes: list  # ObjectNode per SavedObjectGraph node id
    captures: dict  # main-graph VarHandleOp name -> the variable's object node id


def saved_objects(meta_graph_fields, graph):
    """The SavedObjectGraph of a MetaGraphDef (its raw fields, `{number: [bytes]}`) and the
    object node of each variable handle a main-graph call captures; None without one (v1).

    Before: field 7 with concrete function `__inference_signature_wrapper_train_7` (bound_inputs
            [26, 80]) and main-graph node StatefulPartitionedCall(train_x, w, adam/w_velocity).
    After:  SavedObjects(nodes=[...], captures={'w': 26, 'adam/w_velocity': 80}).
    """
    blobs = meta_graph_fields.get(7)
    if not blobs:
        return None
    what = "the MetaGraphDef's object graph"
    nodes, bound = [], {}
    for number, value in message_fields(blobs[-1], what):
        if number == 1 and isinstance(value, bytes):
            nodes.append(_saved_node(value, what))
        elif number == 2 and isinstance(value, bytes):
            name, inputs = _concrete_function(value, what)
            bound[name] = inputs
    captures = {}
    for node in graph:
        f = node.get_attr("f", None) if node.op in CALL_OPS else None
        ids = bound.get(getattr(f, "name", None)) or []
        refs = node.data_inputs[len(node.data_inputs) - len(ids):] if ids else []
        for ref, node_id in zip(refs, ids):  # the captures come last, in bound_inputs' order
            handle = handle_source(graph, ref.node)
            if handle is not None and 0 <= node_id < len(nodes) and nodes[node_id].is_variable:
                captures.setdefault(handle, node_id)
    return SavedObjects(nodes=nodes, captures=captures)


def capture_keys(objects, values):
    """{captured handle: checkpoint key} by pairing the SavedObjectGraph with the checkpoint's
    object graph (`values[OBJECT_GRAPH_KEY]`), as TensorFlow's loader matches them.

    Before: captures {'adam/w_velocity': 80}; node 80 pairs with checkpoint node 80, whose
            VARIABLE_VALUE is 'opt/_variables/3/.ATTRIBUTES/VARIABLE_VALUE'.
    After:  {'adam/w_velocity': 'opt/_variables/3/.ATTRIBUTES/VARIABLE_VALUE'}; a handle whose
            object has no checkpoint value is left out.
    """
    blob = values.get(OBJECT_GRAPH_KEY)
    if objects is None or not objects.captures or blob is None:
        return {}
    ckpt = checkpoint_nodes(blob.item() if hasattr(blob, "item") else blob)
    pairs = pair_nodes(objects.nodes, ckpt)
    out = {}
    for handle, node_id in objects.captures.items():
        key = ckpt[pairs[node_id]].keys.get(_VALUE_ATTRIBUTE) if node_id in pairs else None
        if key:
            out[handle] = key
    return out


def checkpoint_nodes(blob):
    """The TrackableObjectGraph of a checkpoint as ObjectNodes (with their checkpoint keys)."""
    what = f"the checkpoint's {OBJECT_GRAPH_KEY}"
    if not isinstance(blob, bytes):
        raise TfgInputError(f"{what} is not a serialized TrackableObjectGraph")
    nodes = []
    for number, value in message_fields(blob, what):
        if number != 1 or not isinstance(value, bytes):
            continue
        node = ObjectNode()
        for sub, sval in message_fields(value, what):
            if sub == 1 and isinstance(sval, bytes):
                name, node_id = _reference(sval, what)
                node.children[name] = node_id
            elif sub == 2 and isinstance(sval, bytes):
                attr = {n: v for n, v in message_fields(sval, what) if isinstance(v, bytes)}
                node.keys[attr.get(1, b"").decode("utf-8", "replace")] = \
                    attr.get(3, b"").decode("utf-8", "replace")
            elif sub == 3 and isinstance(sval, bytes):
                _add_slot(node, sval, what)
        nodes.append(node)
    return nodes


def pair_nodes(saved, ckpt):
    """{SavedObjectGraph id: TrackableObjectGraph id}: the roots pair, then children of paired
    nodes pair by local name, and slot variables by (original variable, slot name).

    Before: saved 0 -{opt}-> 2 -{_variables}-> 19 -{3}-> 64; checkpoint 0 -{opt}-> 5 -> ...
    After:  {0: 0, 2: 5, 19: ..., 64: ...}
    """
    pairs = {}
    if not saved or not ckpt:
        return pairs
    pairs[0] = 0
    queue = [0]
    while queue:
        while queue:
            s_id = queue.pop()
            s_children = saved[s_id].children
            for name, c_id in ckpt[pairs[s_id]].children.items():
                _pair(pairs, queue, saved, ckpt, s_children.get(name), c_id)
        # Slots hang off the optimizer and name their variable, which may pair only now.
        to_saved = {c: s for s, c in pairs.items()}
        for s_id, c_id in list(pairs.items()):
            for (c_orig, slot_name), c_slot in ckpt[c_id].slots.items():
                s_orig = to_saved.get(c_orig)
                _pair(pairs, queue, saved, ckpt, saved[s_id].slots.get((s_orig, slot_name)),
                      c_slot)
    return pairs


def _pair(pairs, queue, saved, ckpt, s_id, c_id):
    if s_id is None or s_id in pairs or not 0 <= s_id < len(saved) or not 0 <= c_id < len(ckpt):
        return
    pairs[s_id] = c_id
    queue.append(s_id)


def _saved_node(blob, what):
    node = ObjectNode()
    for number, value in message_fields(blob, what):
        if number == 1 and isinstance(value, bytes):
            name, node_id = _reference(value, what)
            node.children[name] = node_id
        elif number == 3 and isinstance(value, bytes):
            _add_slot(node, value, what)
        elif number == _VARIABLE_KIND:
            node.is_variable = True
    return node


def _reference(blob, what):
    """(local_name, node_id) of an ObjectReference."""
    fields = dict(message_fields(blob, what))
    name = fields.get(2, b"")
    return (name.decode("utf-8", "replace") if isinstance(name, bytes) else "",
            fields.get(1, 0) if isinstance(fields.get(1, 0), int) else -1)


def _add_slot(node, blob, what):
    fields = dict(message_fields(blob, what))
    name = fields.get(2, b"")
    orig, slot = fields.get(1, 0), fields.get(3, 0)
    if isinstance(orig, int) and isinstance(slot, int) and isinstance(name, bytes):
        node.slots[(orig, name.decode("utf-8", "replace"))] = slot


def _concrete_function(entry, what):
    """(name, bound_inputs) of a SavedObjectGraph.concrete_functions map entry."""
    name, inputs = "", []
    for number, value in message_fields(entry, what):
        if number == 1 and isinstance(value, bytes):
            name = value.decode("utf-8", "replace")
        elif number == 2 and isinstance(value, bytes):
            for sub, sval in message_fields(value, what):
                if sub == 2 and isinstance(sval, int):  # bound_inputs, unpacked
                    inputs.append(sval)
                elif sub == 2:  # packed
                    pos = 0
                    while pos < len(sval):
                        node_id, pos = read_varint(sval, pos, what)
                        inputs.append(node_id)
    return name, inputs


def handle_source(graph, name):
    """The VarHandleOp a main-graph input comes from (through Identity), or None."""
    for _ in range(8):
        node = graph.get(name)
        if node is None:
            return None
        if node.op == "VarHandleOp":
            return node.name
        if node.op != "Identity" or not node.data_inputs:
            return None
        name = node.data_inputs[0].node
    return None
