"""What this installation of tfg supports, for `tfg info --ops` and `tfg info --devices`: the
ops with a signature or a kernel per device type, and the local devices; and for one graph
(`tfg info GRAPH --ops`), which of its ops tfg runs, differentiates and places. It lives in the CLI
layer because it asks the kernel registry and the executor's device set, which the graph layer
below must not import.

    >>> supported_ops()["MatMul"]
    {'signature': True, 'kernels': ['CPU', 'GPU']}
    >>> local_devices()
    ['/job:localhost/replica:0/task:0/device:CPU:0']
"""
from collections import Counter

from tfg.executor.devices import DeviceSet
from tfg.graphdef.canonical import needs_canonicalizing
from tfg.graphdef.functions import inline_functions, is_functional, library_functions
from tfg.kernels import registry as kernels
from tfg.passes import grad as grads
from tfg.passes.place.colocation import EXECUTOR_OPS, feasible_types
from tfg.schemas.ops import all_ops, get_op, has_op


def supported_ops():
    """{op: {'signature': bool, 'kernels': [device types]}} for every op tfg knows of.

    Before: nothing.  After: {'MatMul': {'signature': True, 'kernels': ['CPU', 'GPU']}, ...}
    """
    out = {op: {"signature": True, "kernels": []} for op in all_ops()}
    for device in (kernels.CPU, kernels.GPU):
        try:
            names = kernels.registered_ops(device)
        except Exception:  # a kernel module that fails to import must not hide the rest
            names = []
        for op in names:
            out.setdefault(op, {"signature": False, "kernels": []})["kernels"].append(device)
    return dict(sorted(out.items()))


def local_devices():
    """Full names of the devices `tfg run` would use by default."""
    return [d.name for d in DeviceSet.from_spec(None)]


# --- one graph: what tfg runs, differentiates and places ----------------------------------
DEVICE_TYPES = (kernels.CPU, kernels.GPU)


def graph_support(graph):
    """For each op type of `graph` as tfg runs it (calls inlined and functional control flow
    lowered by the front door, tfg.graphdef.canonical): its count; whether it has a signature;
    the device types with a kernel ('runs'; control flow is run by the executor itself on any
    device); its gradient ('yes', 'none' = not differentiable by declaration, 'missing'); the
    device types placement can put it on. Plus what the front door replaced and could not, and
    two verdicts: `supported` (every op runs and places) and `differentiable` (every op has a
    gradient or is declared non-differentiable).

    Before: a frozen Keras LSTM whose loops are `While` nodes over a function library.
    After:  {'nodes': 466, 'supported': True, 'differentiable': True,
             'lowered': {'While': 2}, 'not_inlined': {},
             'ops': {'Const': {'count': 80, 'signature': True, 'runs': ['CPU', 'GPU'],
                               'executor': False, 'gradient': 'none',
                               'places': ['CPU', 'GPU']}, ...},
             'unsupported': {}, 'no_gradient': {}}
    """
    lib = library_functions(graph)
    result = inline_functions(graph, strict=False) if needs_canonicalizing(graph) else None
    canon = result.graph if result is not None else graph
    not_inlined = dict(result.skipped) if result is not None else {}
    lowered = Counter(n.op if n.op not in lib else "(function call)" for n in graph
                      if is_functional(n, lib) and n.name not in not_inlined)
    saved = getattr(graph, "saved_model", None)
    if saved is not None and saved.functions:  # inlined when the SavedModel was read
        not_inlined.update(saved.functions.get("not_inlined", {}))
        lowered = Counter({"SavedModel calls, inlined on load":
                           saved.functions.get("inlined", 0)})
    counts = Counter(n.op for n in canon)
    sample = {}
    for n in canon:
        sample.setdefault(n.op, n)
    ops, unsupported, no_grad = {}, {}, {}
    for op, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        row = _op_row(op, sample[op])
        row["count"] = count
        ops[op] = row
        why = _why_unsupported(row)
        if why:
            unsupported[op] = why
        if row["gradient"] == "missing":
            no_grad[op] = count
    return {"nodes": len(canon), "supported": not unsupported, "differentiable": not no_grad,
            "lowered": dict(lowered), "not_inlined": not_inlined, "ops": ops,
            "unsupported": unsupported, "no_gradient": no_grad}


def _op_row(op, node):
    executor = op in EXECUTOR_OPS or (has_op(op) and get_op(op).control_flow is not None)
    runs = [t for t in DEVICE_TYPES if kernels.has_kernel(op, t)]
    grad = grads.get_gradient(op) if grads.has_gradient(op) else None
    return {"count": 0, "signature": has_op(op),
            "runs": list(DEVICE_TYPES) if executor else runs, "executor": executor,
            "gradient": "missing" if grad is None else "yes" if grad.fn else "none",
            "places": sorted(feasible_types(node, DEVICE_TYPES))}


def _why_unsupported(row):
    missing = [what for what, ok in (("no signature", row["signature"]),
                                     ("no kernel", row["runs"]),
                                     ("no device to place it on", row["places"])) if not ok]
    return ", ".join(missing)


def format_support(report, source=None):
    """The text of `tfg info GRAPH --ops`: a table, then what is missing, then the verdict."""
    lines = []
    if source:
        lines.append(f"graph: {source}")
    lines.append(f"nodes: {report['nodes']} (as tfg runs it)")
    if report["lowered"]:
        lines.append("lowered by the front door: " + ", ".join(
            f"{op} ({n})" for op, n in sorted(report["lowered"].items())))
    lines.append(f"ops ({len(report['ops'])}; runs = device types with a kernel, 'executor' "
                 "= control flow; grad = yes, none (not differentiable), MISSING):")
    names = {op: op if row["signature"] else op + " (no signature)"
             for op, row in report["ops"].items()}
    width = max([24] + [len(n) for n in names.values()])
    lines.append(f"  {'count':>6}  {'op':{width}s}  {'runs':9s} {'grad':8s} places")
    for op, row in report["ops"].items():
        runs = "executor" if row["executor"] else ",".join(row["runs"]) or "NO"
        grad = row["gradient"].upper() if row["gradient"] == "missing" else row["gradient"]
        lines.append(f"  {row['count']:>6}  {names[op]:{width}s}  {runs:9s} {grad:8s} "
                     f"{','.join(row['places']) or 'NO'}")
    for name, why in sorted(report["not_inlined"].items()):
        lines.append(f"not inlined: {name}: {why}")
    if report["unsupported"]:
        lines.append("unsupported ops: " + "; ".join(
            f"{op} ({report['ops'][op]['count']}): {why}"
            for op, why in report["unsupported"].items()))
    if report["no_gradient"]:
        lines.append("ops without a gradient: " + ", ".join(
            f"{op} ({n})" for op, n in report["no_gradient"].items()))
    verdict = "yes: tfg runs and places every op" if report["supported"] else \
        f"NO: {len(report['unsupported'])} op type(s) tfg cannot run or place"
    grad = "every op differentiates (or is declared non-differentiable)" \
        if report["differentiable"] else \
        f"{len(report['no_gradient'])} op type(s) have no gradient"
    lines.append(f"supported: {verdict}; tfg grad: {grad}")
    return "\n".join(lines)
