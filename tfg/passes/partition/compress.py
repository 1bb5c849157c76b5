"""Lossy transfer compression (white paper 5.5) of a partitioned graph: every float32
`_Send`/`_Recv` pair gets the attr `_tfg_compress: "bf16"`, and the executor sends the upper
16 bits of each value, the receiver filling the low 16 bits with zeros
(tfg/schemas/truncate.py has the rule).

    Before: a (CPU:0) -> a/_1 (_Send T=float);  a/_2 (_Recv tensor_type=float, CPU:1) -> b
    After:  the same nodes, both with _tfg_compress="bf16"

Why an attr and not a pair of ops: TensorFlow has no truncating cast (its bfloat16 Cast
rounds to nearest even), and an attr whose name starts with "_" is one TensorFlow's importer
accepts and ignores, so the graph still imports and runs there, exactly. Pairs of other
dtypes (the loop predicates of control loops, int32 shapes) are left as they are.
"""
from tfg.errors import TfgInputError
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names
from tfg.schemas.truncate import COMPRESS_ATTR, MODES


def compress_transfers(graph, mode="bf16"):
    """Mark the float32 _Send/_Recv pairs of `graph` (in place); -> how many nodes were
    marked. `mode` "none" removes the marks."""
    if mode not in MODES:
        raise TfgInputError(f"--compress-transfers must be one of {', '.join(MODES)}, not "
                            f"{mode!r}")
    ends = {op: attr for ops, attr in ((control_flow_names("send"), "T"),
                                       (control_flow_names("recv"), "tensor_type"))
            for op in ops}
    marked = 0
    for node in graph:
        attr = ends.get(node.op)
        if attr is None:
            continue
        if mode == "none":
            if node.has_attr(COMPRESS_ATTR):
                node.del_attr(COMPRESS_ATTR)
            continue
        if _dtype(node, attr) == DType.FLOAT:
            node.set_attr(COMPRESS_ATTR, b"bf16")
            marked += 1
    return marked


def _dtype(node, attr):
    try:
        value = node.get_attr(attr)
    except KeyError:
        return None
    try:
        return DType(int(value)).base
    except (TypeError, ValueError):
        return None
