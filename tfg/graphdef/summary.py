"""What `tfg info` reports about a graph, as plain data (like TensorFlow's summarize_graph).

    >>> s = summarize(load("mlp.pb"), source="mlp.pb")
    >>> s["nodes"], s["inputs"][0]
    (18, {'name': 'x', 'op': 'Placeholder', 'dtype': 'float32', 'shape': [None, 4]})
    >>> s["outputs"][0], s["constant_bytes"], s["variable_bytes"]
    ({'name': 'probs', 'op': 'Softmax', 'dtype': 'float32', 'shape': [None, 3]}, 268, 268)
    >>> s["run_command"]
    'tfg run mlp.pb --random-feeds --fetch probs --fetch pred'
    >>> print(format_text(s))

The inputs of a graph are its placeholders, its outputs the nodes nobody consumes (not state
updates, initializers or the `_Send`s of a partitioned graph); a SavedModel's are its
signatures' inputs and outputs instead, and its run line runs a signature. The run line feeds
itself (`--random-feeds`; `@NAME.npy` for strings and unknown ranks) and names the devices of
a partitioned graph, so it runs as printed.

Everything here works on graphs with unknown or custom ops and on malformed control flow (the
problem is reported in the summary instead of raised), so `tfg info` can describe any GraphDef.
"""
import json
import math
import re
import shlex
from collections import Counter

from tfg.errors import TfgError
from tfg.graphdef import frames
from tfg.graphdef.functions import LOWERED_OPS
from tfg.schemas.dtypes import DType
from tfg.schemas.tensors import declared_nbytes
from tfg.schemas.ops import control_flow_names, has_op, ops_with

PLACEHOLDER_OPS = ops_with("placeholder")
VARIABLE_OPS = ops_with("variable")
# Consumer-less nodes of these ops are bookkeeping (init, save/restore), not outputs.
_NOT_OUTPUT_OPS = PLACEHOLDER_OPS | VARIABLE_OPS | frozenset((
    "Const", "NoOp", "Assign", "AssignAdd", "AssignSub", "AssignVariableOp",
    "AssignAddVariableOp", "AssignSubVariableOp", "SaveV2", "RestoreV2", "Save", "Restore",
    "SaveSlices", "RestoreSlice", "MergeV2Checkpoints", "ShardedFilename", "StringJoin",
    "VarIsInitializedOp", "IsVariableInitialized")) | control_flow_names("control_trigger", "send")
_INIT_NAME = re.compile(r"(^|/)(init(_\d+)?|init_all_tables|.*_?initializer|save(_\d+)?/.*)$")
_EXIT_OPS = control_flow_names("exit")


def summarize(graph, source=None):
    """A JSON-ready dict describing `graph` (see the module docstring for the keys).

    Before: a Graph loaded from `model.pb`.
    After:  {'nodes': 18, 'ops': {'Const': 6, ...}, 'inputs': [...], 'outputs': [...],
             'variables': [...], 'parameters': 1234, 'devices': {...}, 'while_loops': [...],
             'conds': 0, 'unknown_ops': {...}, 'run_command': 'tfg run ...', ...}
    """
    ops = Counter(node.op for node in graph)
    inputs = [_placeholder(n) for n in graph if n.op in PLACEHOLDER_OPS]
    variables = [_variable(n) for n in graph if n.op in VARIABLE_OPS]
    known = [v["params"] for v in variables if v["params"] is not None]
    devices = Counter(node.device or "" for node in graph)
    info, loops, conds, cf_error = _control_flow(graph)
    outputs = _outputs(graph, info)
    _add_output_types(graph, outputs)
    summary = {
        "graph": source,
        "nodes": len(graph),
        "ops": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "inputs": inputs,
        "outputs": outputs,
        "variables": variables,
        "parameters": sum(known),
        "parameters_unknown": len(variables) - len(known),
        "constant_bytes": sum(_const_bytes(n) for n in graph if n.op == "Const"),
        "variable_bytes": sum(v["bytes"] or 0 for v in variables),
        "devices": dict(sorted(devices.items())),
        "while_loops": loops,
        "conds": conds,
        "control_flow_error": cf_error,
        # (functional While / If / calls are not unknown: tfg lowers or inlines them)
        "unknown_ops": {op: n for op, n in sorted(ops.items())
                        if not has_op(op) and op not in LOWERED_OPS},
        "functions": len(graph.library.function) if graph.library is not None else 0,
        "versions": {"producer": graph.versions.producer,
                     "min_consumer": graph.versions.min_consumer},
        "dangling_inputs": _dangling(graph),
    }
    saved = getattr(graph, "saved_model", None)
    if saved is not None:  # what a user calls: the signatures, not the internal nodes
        from tfg.graphdef import savedmodel  # lazy: only SavedModels need it

        summary["inputs"], summary["outputs"] = _signature_tensors(saved)
        summary["saved_model"] = savedmodel.describe(saved)
        summary["run_command"] = savedmodel.run_command(source, saved)
    else:
        summary["run_command"] = run_command(graph, summary, source)
    return summary


def _add_output_types(graph, outputs):
    """Each output's dtype and shape from shape inference (None where unknown)."""
    from tfg.graphdef.infer import infer  # lazy: infer imports the op registry's shape code

    try:
        known = infer(graph)
    except Exception:  # noqa: BLE001 - info describes any graph; inference is best effort
        known = {}
    for out in outputs:
        t = known.get((out["name"], 0))
        out["dtype"] = _dtype_name(t.dtype) if t is not None else None
        out["shape"] = list(t.shape) if t is not None and t.shape is not None else None


def _signature_tensors(saved):
    """(inputs, outputs) of every signature: key, tensor name, dtype, shape."""
    inputs, outputs = [], []
    for name, sig in saved.signatures.items():
        for kind, rows in (("inputs", inputs), ("outputs", outputs)):
            for key, ti in sig[kind].items():
                rows.append({"signature": name, "name": key, "tensor": ti["name"],
                             "dtype": ti["dtype"], "shape": ti["shape"]})
    return inputs, outputs


def _const_bytes(node):
    """What the Const's value takes once decoded, read from its message (a splat claiming a
    huge shape is counted, never decoded)."""
    av = node.attr_view.get("value")
    return declared_nbytes(av.tensor) if av is not None and av.HasField("tensor") else 0


def _placeholder(node):
    dtype = node.get_attr("dtype", None) if node.has_attr("dtype") else None
    shape = node.get_attr("shape", None) if node.has_attr("shape") else None
    return {"name": node.name, "op": node.op, "dtype": _dtype_name(dtype),
            "shape": None if shape is None or not isinstance(shape, tuple) else list(shape)}


def _variable(node):
    dtype = node.get_attr("dtype", None) if node.has_attr("dtype") else None
    shape = node.get_attr("shape", None) if node.has_attr("shape") else None
    if not isinstance(shape, tuple):
        shape = None
    params = nbytes = None
    if shape is not None and all(d is not None and d >= 0 for d in shape):
        params = math.prod(shape)
        try:
            nbytes = params * dtype.base.np.itemsize
        except Exception:  # noqa: BLE001 - no dtype, or one without a fixed size (string)
            nbytes = None
    return {"name": node.name, "op": node.op, "dtype": _dtype_name(dtype),
            "shape": None if shape is None else list(shape), "params": params, "bytes": nbytes}


def _dtype_name(dtype):
    if isinstance(dtype, DType):
        try:
            return dtype.tf_name
        except Exception:  # an out-of-range enum value in a hand-made file
            return str(int(dtype))
    return None


def _outputs(graph, info):
    consumed = set()
    for node in graph:
        consumed.update(ref.node for ref in node.input_refs)
    # An unused Exit of a loop whose other results are used is an unused loop variable
    # (a counter, say), not a result the user wants.
    used_loops = {info.frame_of(n.name) for n in graph
                  if info is not None and n.op in _EXIT_OPS and n.name in consumed}
    return [{"name": n.name, "op": n.op} for n in graph
            if n.name not in consumed and n.op not in _NOT_OUTPUT_OPS
            and not _INIT_NAME.search(n.name)
            and not (n.op in _EXIT_OPS and info is not None
                     and info.frame_of(n.name) in used_loops)]


def _dangling(graph):
    out = []
    for node in graph:
        for ref in node.input_refs:
            if ref.node not in graph:
                out.append({"node": node.name, "input": str(ref)})
    return out


def _control_flow(graph):
    """(ControlFlowInfo or None, while-loop frames, number of conds, error text or None)."""

    try:
        info = frames.analyze(graph)
    except TfgError as e:
        return None, [], 0, " ".join(str(e).split())
    return info, frames.frame_summary(info), len(info.conds), None


def run_command(graph, summary, source=None):
    """A ready-to-paste `tfg run` line feeding every placeholder and fetching every output.

    Before: placeholders x: float32 [None, 2], s: string []; outputs [probs]; variables with
            an `init` NoOp; nodes on CPU:0 and CPU:1 of a partitioned graph.
    After:  "tfg run model.pb --random-feeds --feed s=@s.npy --devices cpu:2 --init init
             --fetch probs"
    """
    parts = ["tfg", "run", shlex.quote(source) if source and source != "-" else "GRAPH"]
    made_up = False
    for ph in summary["inputs"]:
        if ph["op"] == "PlaceholderWithDefault":
            continue  # has a value already; feeding it is optional
        if ph["shape"] is None or ph["dtype"] in (None, "string", "resource", "variant"):
            parts += ["--feed", shlex.quote(f"{ph['name']}=@{_file_name(ph['name'])}.npy")]
        else:
            made_up = True
    if made_up:
        parts.insert(3, "--random-feeds")
    devices = devices_flag(summary["devices"])
    if devices:
        parts += devices
    if summary["variables"]:
        init = graph.get("init")
        if init is not None and init.op == "NoOp":
            parts += ["--init", "init"]
    for out in summary["outputs"]:
        parts += ["--fetch", shlex.quote(out["name"])]
    return " ".join(parts)


def _file_name(name):
    return name.replace("/", "_")


_LOCAL_DEVICE = re.compile(r"^/job:localhost/replica:0/task:0/device:(CPU|GPU):(\d+)$")


def devices_flag(devices):
    """`--devices cpu:2[,gpu:1]` for a graph whose nodes sit on numbered local devices (a
    partitioned graph runs only on the device set it was split for); [] otherwise."""
    counts = {}
    for name in devices:
        m = _LOCAL_DEVICE.match(name)
        if m is None:
            continue
        kind, index = m.group(1).lower(), int(m.group(2))
        counts[kind] = max(counts.get(kind, 0), index + 1)
    if not counts or counts == {"cpu": 1}:
        return []
    return ["--devices", ",".join(f"{k}:{n}" for k, n in sorted(counts.items()))]


def format_text(summary, saved=None):
    """The human-readable form `tfg info` prints (`saved`: the graph's SavedModelInfo, whose
    signatures take the place of the inputs and outputs)."""
    lines = []
    add = lines.append
    if summary.get("graph"):
        add(f"graph: {summary['graph']}")
    add(f"nodes: {summary['nodes']}  (producer {summary['versions']['producer']}, "
        f"{summary['functions']} library functions)")
    add("ops:")
    for op, n in summary["ops"].items():
        add(f"  {n:6d}  {op}")
    if saved is None:  # a SavedModel's are its signatures, shown below
        add(f"inputs ({len(summary['inputs'])}):")
        for ph in summary["inputs"]:
            add(f"  {ph['name']}: {ph['dtype'] or '?'} {_shape_text(ph['shape'])}"
                + ("  (has a default)" if ph["op"] == "PlaceholderWithDefault" else ""))
        add(f"outputs ({len(summary['outputs'])}):")
        for out in summary["outputs"]:
            add(f"  {out['name']}: {out['dtype'] or '?'} {_shape_text(out['shape'])}  "
                f"({out['op']})")
    add(f"constants: {_bytes_text(summary['constant_bytes'])}")
    if summary["variables"]:
        extra = (f", {summary['parameters_unknown']} of unknown shape"
                 if summary["parameters_unknown"] else "")
        add(f"variables ({len(summary['variables'])}, {summary['parameters']:,} "
            f"parameters, {_bytes_text(summary['variable_bytes'])}{extra}):")
        for v in summary["variables"]:
            shape = "unknown" if v["shape"] is None else str(v["shape"])
            add(f"  {v['name']}: {v['dtype'] or '?'} {shape}")
    add("devices:")
    for dev, n in summary["devices"].items():
        add(f"  {n:6d}  {dev or '(unplaced)'}")
    if summary["control_flow_error"]:
        add(f"control flow: malformed: {summary['control_flow_error']}")
    if summary["while_loops"]:
        add(f"while loops ({len(summary['while_loops'])}):")
        for f in summary["while_loops"]:
            add(f"  {'  ' * (f['depth'] - 1)}{f['name']}: {f['loop_vars']} loop vars, "
                f"parallel_iterations={f['parallel_iterations']}, {f['nodes']} nodes")
    if summary["conds"]:
        add(f"conds: {summary['conds']}")
    if summary["unknown_ops"]:
        add("ops tfg has no signature for: " + ", ".join(
            f"{op} ({n})" for op, n in summary["unknown_ops"].items()))
    if summary["dangling_inputs"]:
        d = summary["dangling_inputs"]
        add(f"dangling inputs ({len(d)}): " + ", ".join(
            f"{x['node']} <- {x['input']}" for x in d[:5]) + (" ..." if len(d) > 5 else ""))
    if saved is not None:
        from tfg.graphdef import savedmodel  # lazy: only SavedModels need it

        lines.extend(savedmodel.format_signatures(saved))
    if summary["run_command"]:
        add("run it with:")
        add("  " + summary["run_command"])
    return "\n".join(lines)


def _shape_text(shape):
    """[?, 4], [] (a scalar) or `unknown` (unknown rank)."""
    if shape is None:
        return "unknown"
    return "[" + ", ".join("?" if d is None or d < 0 else str(d) for d in shape) + "]"


def _bytes_text(n):
    """1,234 bytes, 12.3 KiB, 4.0 MiB."""
    if n < 10 * 1024:
        return f"{n:,} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n} bytes"
def to_json(data):
    return json.dumps(data, indent=2, sort_keys=False, default=str)
