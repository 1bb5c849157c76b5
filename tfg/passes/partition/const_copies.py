"""Give every device that reads a small constant its own copy, instead of a Send/Recv pair.

A `Const` with no inputs (so in no loop frame) and at most `MAX_COPIED_ELEMENTS` numeric or
bool values is copied onto each other device where it has data consumers, and those consumers
read the copy. Two reasons:

- TensorFlow must be able to import what `tfg partition` writes. Its shape functions need some
  inputs as constants at import: the `block_shape` of SpaceToBatchND/BatchToSpaceND, a
  Reshape's shape, a Pad's paddings. Behind a `_Recv` (whose output shape is unknown) the
  import of SpaceToBatchND fails ("block_shape must have known size"); this happened with a
  dilated convolution's gradient placed apart from the forward convolution whose block_shape
  Const it shares.
- A transfer costs a rendezvous a step; a copy of a few numbers costs nothing at run time.

    >>> copy_small_consts(graph)   # bs (Const [2] int32, CPU:0) read by s2b on CPU:1
    ['bs/_copy_cpu_1']
    >>> graph["s2b"].inputs[1], graph["bs/_copy_cpu_1"].device[-5:]
    ('bs/_copy_cpu_1', 'CPU:1')

Each copy carries `_tfg_copy_of` (the original's name): a feed of the original must reach the
copies too, and `tfg run` refuses such a feed with a clear error instead of answering with the
copies' stale values (tfg.executor.feeds.refuse_fed_copies).
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.names import CONTROL, COPY_OF_ATTR, DeviceSpec, input_string

MAX_COPIED_ELEMENTS = 64


def _copyable(node):
    if node.op != "Const" or node.inputs:
        return False
    if "value" not in node.attr_view or not node.attr_view["value"].HasField("tensor"):
        return False
    value = node.attr_view["value"]
    dims = [d.size for d in value.tensor.tensor_shape.dim]
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) > MAX_COPIED_ELEMENTS:
        return False
    try:
        dtype = node.get_attr("dtype")
    except TfgInputError:
        return False
    return getattr(dtype, "np", None) is not None and dtype.np.kind in "biuf"


def _device_suffix(device):
    spec = DeviceSpec.parse(device)
    return f"{(spec.device_type or 'dev').lower()}_{spec.device_index or 0}"


def copy_small_consts(graph):
    """Copy small root-frame Consts to each device that reads them (in place, before the
    edges are split); returns the names of the copies, in the order they were added."""
    added = []
    copies = {}  # (const name, device) -> copy name
    for node in list(graph):
        for i, ref in enumerate(node.input_refs):
            if ref.port == CONTROL:
                continue
            src = graph.get(ref.node)
            if src is None or src.device == node.device or not _copyable(src):
                continue
            key = (src.name, node.device)
            if key not in copies:
                name = graph.unique_name(f"{src.name}/_copy_{_device_suffix(node.device)}")
                attrs = dict(src.attr_view.items())
                attrs[COPY_OF_ATTR] = src.name.encode()
                graph.add_node(name, "Const", (), attrs, node.device)
                copies[key] = name
                added.append(name)
            graph.replace_input(node.name, i, input_string(copies[key], ref.port))
    return added

