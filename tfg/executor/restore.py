"""Restore a SavedModel's trained values into a Session's variables: the executor's half of
loading a SavedModel (tfg.graphdef.savedmodel reads the files; this assigns the values).

    >>> sess = Session(g)                                 # g = load_graph("export/1")
    >>> restore_variables(sess, g, read_variables("export/1"))
    ['w1', 'w2']
"""
from tfg.graphdef.savedmodel import read_variables
from tfg.graphdef.savedmodel_tf2 import (restore_resource_variables, run_init_ops,
                                         unrestored_captures)
from tfg.graphdef.state_checks import check_value
from tfg.schemas.ops import ref_variable_ops

_REF_VARIABLES = ref_variable_ops()


def load_saved_model_state(session, graph):
    """Everything TensorFlow's SavedModel loader does to a fresh session before the first step:
    restore the variables (when the SavedModel has any), then run its init op (table
    initializers) with the assets' paths fed. Returns the checkpoint keys restored.

    Before: a Session of `load_graph("export/1")`: variables unset, tables empty.
    After:  the variables hold their saved values and the tables their vocabularies.
    """
    info = graph.saved_model
    if info.variables_prefix:
        return restore_variables(session, graph, read_variables(info.path))
    run_init_ops(session, graph)
    return []


def restore_variables(session, graph, values):
    """Assign `values` ({variable name: array}) to the graph's variables in `session`.

    Before: a fresh Session of a SavedModel's graph (variables uninitialized).
    After:  every variable the bundle holds has its saved value, as TensorFlow's loader's
            restore op would leave it. Resource variables (a TF2 SavedModel) are restored by
            running the saver's restore op (see tfg.graphdef.savedmodel_tf2); captured
            variables it does not assign (Keras 3 gives the saver copies of its variables)
            get the checkpoint value their object graph node names, as TF's TF2 loader does.
    """
    declared = {}
    for node in graph:
        if node.op in _REF_VARIABLES:
            container = node.get_attr("container", b"").decode()
            short = node.get_attr("shared_name", b"").decode() or node.name
            declared[node.name] = (container, short, node.get_attr("dtype", None),
                                   node.get_attr("shape", None))
        elif node.op == "VarHandleOp":  # a TF2 SavedModel: its restore function knows them
            restored = restore_resource_variables(session, graph, values)
            restored = set(restored) | set(_restore_captures(session, graph, values))
            _init(session, graph)
            return sorted(restored)
    assign = {}
    for name, value in values.items():
        if name not in declared:
            continue  # e.g. a slot variable of an optimizer that the graph was pruned of
        container, short, dtype, shape = declared[name]
        check_value(name, value, dtype, shape, _variables_source(graph))
        assign[(container, short)] = (value, dtype, shape)
    session.assign_variables(assign)
    _init(session, graph)
    return sorted(n for n in values if n in declared)


def _init(session, graph):
    if getattr(graph, "saved_model", None) is not None:
        run_init_ops(session, graph)


def _restore_captures(session, graph, values):
    """Assign the captured handles the restore op missed; returns their checkpoint keys."""
    keys = unrestored_captures(graph, values)
    assign = {}
    for handle, key in keys.items():
        node = graph[handle]
        container = node.get_attr("container", b"").decode()
        short = node.get_attr("shared_name", b"").decode() or node.name
        dtype, shape = node.get_attr("dtype", None), node.get_attr("shape", None)
        check_value(key, values[key], dtype, shape, _variables_source(graph))
        assign[(container, short)] = (values[key], dtype, shape)
    session.assign_variables(assign)
    return keys.values()


def _variables_source(graph):
    info = getattr(graph, "saved_model", None)
    return f"{info.path}/variables" if info is not None else "variables"
