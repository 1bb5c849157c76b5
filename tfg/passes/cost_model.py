"""How long a node takes on a device and how long its outputs take to move: the costs the
placer simulates with.

Two sources, the measured one winning where it knows a node:
- static estimates from inferred shapes: FLOPs and bytes moved per op (MatMul, Conv2D,
  elementwise, reductions, ...), divided by a device type's speed, plus a per-op overhead (and
  a kernel launch on a GPU);
- measurements: a cost-model file that `tfg run --profile cost.json` writes, like TensorFlow's
  CostModel: per node the number of runs, total microseconds and bytes per output.

    >>> cm = CostModel()
    >>> cm.compute_us(matmul_node, "GPU", shapes) < cm.compute_us(matmul_node, "CPU", shapes)
    True
    >>> cm.transfer_us(4 << 20, "/job:a/replica:0/task:0/device:CPU:0",
    ...                "/job:a/replica:0/task:0/device:GPU:0")  # 4 MiB over PCIe
    345.5...

The file (JSON):

    {"format": "tfg.cost_model", "version": 1, "steps": 10,
     "nodes": [{"name": "mm", "op": "MatMul", "device": "/job:localhost/.../CPU:0",
                "count": 10, "total_us": 5300.0, "output_bytes": [4194304],
                "max_memory_bytes": 4194304}]}

`count` counts kernel runs over all `steps` (a node in a loop runs many times per step); the
placer charges a node `total_us / steps`, its share of one step.
"""
import json
import math
from dataclasses import dataclass, field

from tfg.errors import TfgInputError
from tfg.graphdef.io import write_bytes_atomic
from tfg.graphdef.names import DeviceSpec
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, ops_with, signature

FORMAT = "tfg.cost_model"


@dataclass(frozen=True)
class DeviceSpeed:
    """Throughputs of one device type (per microsecond) and its fixed cost per op."""

    flops_per_us: float
    bytes_per_us: float  # memory bandwidth
    overhead_us: float  # executor dispatch (+ kernel launch on a GPU)


# Defaults in the right proportions for tfg's executors: a numpy CPU kernel runs at a few tens
# of GFLOP/s behind ~10 us of Python dispatch; a CuPy kernel at TFLOP/s behind a launch.
DEFAULT_SPEEDS = {
    "CPU": DeviceSpeed(flops_per_us=20e3, bytes_per_us=10e3, overhead_us=10.0),
    "GPU": DeviceSpeed(flops_per_us=10e6, bytes_per_us=800e3, overhead_us=15.0),
}


@dataclass(frozen=True)
class Link:
    """A copy path: bandwidth in Gbit/s and latency in us (TensorFlow: bytes/(Gbps*125) + lat)."""

    gbps: float
    latency_us: float

    def time_us(self, nbytes):
        return nbytes / (self.gbps * 125.0) + self.latency_us


DEFAULT_LINKS = {
    # CPU <-> CPU in one process: no copy, but a Send and a Recv to dispatch and a hand-off.
    "local": Link(gbps=400.0, latency_us=25.0),
    "pcie": Link(gbps=100.0, latency_us=10.0),  # host <-> device
    "network": Link(gbps=10.0, latency_us=100.0),  # task <-> task
}

# FLOPs per output element of elementwise ops beyond one (transcendentals cost more).
_ELEMENTWISE_WEIGHT = {
    "Exp": 8, "Log": 8, "Log1p": 8, "Expm1": 8, "Tanh": 8, "Sigmoid": 8, "Sin": 8, "Cos": 8,
    "Tan": 10, "Erf": 10, "Pow": 12, "Sqrt": 4, "Rsqrt": 4, "Softplus": 10, "Elu": 8,
    "Selu": 8, "Softmax": 10, "LogSoftmax": 12, "RealDiv": 2, "Div": 2, "Reciprocal": 2,
}
# Ops that cost nothing but dispatch: feeds, variables, the executor's own control flow and
# communication, identities (but CheckNumerics, the stateful one, reads every element), views
# and metadata.
_FREE_OPS = (ops_with("placeholder") | ops_with("variable") | control_flow_names()
             | frozenset(n for n in ops_with("identity") if not get_op(n).stateful)
             | ops_with("view") | ops_with("shape_metadata") | frozenset({"Const", "NoOp"}))


@dataclass
class NodeRecord:
    """What was measured for one node, summed over its runs."""

    op: str = ""
    device: str = ""
    count: int = 0
    total_us: float = 0.0
    output_bytes: list = field(default_factory=list)
    max_memory_bytes: int = 0


class CostModel:
    """Static estimates plus optional measurements (see the module docstring)."""

    def __init__(self, speeds=None, links=None):
        self.speeds = dict(DEFAULT_SPEEDS, **(speeds or {}))
        self.links = dict(DEFAULT_LINKS, **(links or {}))
        self.nodes = {}  # node name -> NodeRecord
        self.steps = 0

    # --- measurements ---------------------------------------------------------------------
    def record(self, name, op, device, elapsed_us, output_bytes=()):
        """Add one run of node `name` (the executor's profiler calls this per kernel run)."""
        rec = self.nodes.get(name)
        if rec is None:
            rec = self.nodes[name] = NodeRecord(op=op, device=device)
        rec.count += 1
        rec.total_us += float(elapsed_us)
        sizes = [int(b) for b in output_bytes]
        if len(rec.output_bytes) < len(sizes):
            rec.output_bytes.extend([0] * (len(sizes) - len(rec.output_bytes)))
        for i, b in enumerate(sizes):
            rec.output_bytes[i] = max(rec.output_bytes[i], b)
        rec.max_memory_bytes = max(rec.max_memory_bytes, sum(sizes))

    def record_step(self, events):
        """Add one step's trace events (`Session.last_trace.events`: name, op, device,
        start_ns, dur_ns, thread and, from local runs, output bytes) and count the step.

        Before: cm.steps == 0.  After record_step of a step where `mm` ran once in 50 us:
                cm.steps == 1, cm.nodes["mm"].total_us == 50.0.
        """
        for event in events:
            name, op, device, _, dur_ns = event[:5]
            self.record(name, op, device, dur_ns / 1000.0, event[6] if len(event) > 6 else ())
        self.steps += 1

    def to_json(self):
        nodes = [{"name": name, "op": r.op, "device": r.device, "count": r.count,
                  "total_us": round(r.total_us, 3), "output_bytes": list(r.output_bytes),
                  "max_memory_bytes": r.max_memory_bytes} for name, r in self.nodes.items()]
        return {"format": FORMAT, "version": 1, "steps": self.steps, "nodes": nodes}

    def save(self, path):
        """Write the cost-model file (JSON) atomically: a failed write leaves no partial file."""
        write_bytes_atomic(path, (json.dumps(self.to_json(), indent=1) + "\n").encode())

    @staticmethod
    def from_json(data, source="<cost model>"):
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise TfgInputError(f"{source}: not a tfg cost-model file (expected a JSON object "
                                "with a 'nodes' list)")
        if data.get("format", FORMAT) != FORMAT:
            raise TfgInputError(f"{source}: format {data.get('format')!r} is not {FORMAT!r}")
        cm = CostModel()
        cm.steps = int(data.get("steps", 0) or 0)
        for i, item in enumerate(data["nodes"]):
            try:
                cm.nodes[str(item["name"])] = NodeRecord(
                    op=str(item.get("op", "")), device=str(item.get("device", "")),
                    count=int(item.get("count", 1)), total_us=float(item["total_us"]),
                    output_bytes=[int(b) for b in item.get("output_bytes", [])],
                    max_memory_bytes=int(item.get("max_memory_bytes", 0)))
            except (KeyError, TypeError, ValueError) as e:
                raise TfgInputError(f"{source}: node entry {i} is malformed ({e})") from None
        return cm

    @staticmethod
    def load(path):
        """Read a cost-model file written by `save` (or `tfg run --profile`)."""
        try:
            with open(path) as f:
                data = json.load(f)
        except OSError as e:
            raise TfgInputError(f"cannot read cost model {path!r}: {e.strerror}") from None
        except (ValueError, RecursionError) as e:  # RecursionError: [[[[...: nested too deep
            raise TfgInputError(f"cost model {path!r} is not JSON: {e}") from None
        return CostModel.from_json(data, source=path)

    @staticmethod
    def from_step_stats(step_stats, steps=1):
        """A CostModel from TensorFlow-shaped StepStats (a message or the same as dicts):
        `dev_stats[].node_stats[]` with node_name, all_start_micros, op_end_rel_micros (or
        all_end_rel_micros), timeline_label and output[].tensor_description.
        allocation_description.requested_bytes.

        Before: {"dev_stats": [{"device": "/...CPU:0", "node_stats": [{"node_name": "mm",
                 "op_end_rel_micros": 50, ...}]}]}.  After: cm.nodes["mm"].total_us == 50.
        """
        cm = CostModel()
        cm.steps = steps
        for dev in _get(step_stats, "dev_stats", []):
            device = _get(dev, "device", "")
            for ns in _get(dev, "node_stats", []):
                name = _get(ns, "node_name", "")
                if not name:
                    continue
                dur = _get(ns, "op_end_rel_micros", 0) or _get(ns, "all_end_rel_micros", 0)
                label = _get(ns, "timeline_label", "") or ""
                op = label.split("=", 1)[-1].strip().split("(", 1)[0] if "=" in label else ""
                sizes = []
                for out in _get(ns, "output", []):
                    desc = _get(_get(out, "tensor_description", {}), "allocation_description",
                                {})
                    sizes.append(int(_get(desc, "requested_bytes", 0) or 0))
                cm.record(name, op, device, dur, sizes)
        return cm

    def measured_us(self, node):
        """The measured time of a node per step, or None (unknown, or a different op now)."""
        rec = self.nodes.get(node.name)
        if rec is None or rec.count <= 0 or (rec.op and rec.op != node.op):
            return None
        return rec.total_us / (self.steps or rec.count)

    # --- estimates ------------------------------------------------------------------------
    def compute_us(self, node, device_type, shapes):
        """Microseconds `node` takes on a device of `device_type` (measured when known; a
        measurement on another device type is scaled by the static estimates' ratio)."""
        static = self._static_us(node, device_type, shapes)
        rec = self.nodes.get(node.name)
        measured = self.measured_us(node)
        if measured is None:
            return static
        measured_type = DeviceSpec.parse(rec.device).device_type if rec.device else None
        if measured_type in (None, device_type):
            return measured
        return measured * static / max(self._static_us(node, measured_type, shapes), 1e-9)

    def _static_us(self, node, device_type, shapes):
        speed = self.speeds.get(device_type) or self.speeds["CPU"]
        if node.op in _FREE_OPS:
            return speed.overhead_us
        flops, nbytes = estimate_work(node, shapes)
        return speed.overhead_us + max(flops / speed.flops_per_us, nbytes / speed.bytes_per_us)

    def output_bytes(self, node, port, shapes):
        """Bytes of output `port` (measured, else shape x dtype size, else 4 KiB)."""
        rec = self.nodes.get(node.name)
        if rec is not None and port < len(rec.output_bytes) and rec.output_bytes[port]:
            return rec.output_bytes[port]
        n = _elements(shapes.get((node.name, port)))
        return (n if n is not None else 1024) * _itemsize(node, port)

    def link(self, src_device, dst_device):
        a, b = DeviceSpec.parse(src_device), DeviceSpec.parse(dst_device)
        if (a.job, a.replica, a.task) != (b.job, b.replica, b.task):
            return self.links["network"]
        if a.device_type == b.device_type == "CPU":
            return self.links["local"]
        return self.links["pcie"]

    def transfer_us(self, nbytes, src_device, dst_device):
        """Copy time between two devices; zero on the same device."""
        if src_device == dst_device:
            return 0.0
        return self.link(src_device, dst_device).time_us(nbytes)


def _get(obj, name, default):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _elements(shape):
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    return math.prod(shape)


def _itemsize(node, port):
    try:
        dt = signature.output_dtypes(node)[port].base
    except Exception:  # unknown op or malformed attrs: assume float32
        return 4
    try:
        return dt.np.itemsize if dt != DType.STRING else 64
    except Exception:  # resource / variant handles
        return 16


def estimate_work(node, shapes):
    """(FLOPs, bytes moved) of one run of `node` from its tensors' shapes (None dims: 1 KiB
    guesses), e.g. MatMul [M,K]x[K,N] -> 2*M*N*K FLOPs."""
    ins = [shapes.get((r.node, r.port)) for r in node.data_inputs]
    outs = [shapes.get((node.name, p)) for p in range(max(1, _num_outputs(node)))]
    in_elems = sum(_elements(s) or 256 for s in ins)
    out_elems = sum(_elements(s) or 256 for s in outs)
    nbytes = 4 * (in_elems + out_elems)
    op = node.op
    if op in ("MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = ins[0] if ins else None
        k = None
        if a is not None and len(a) >= 2:
            ta = node.get_attr("transpose_a", node.get_attr("adj_x", False))
            k = a[-2] if ta else a[-1]
        out = _elements(outs[0])
        if out is not None and k is not None:
            return 2.0 * out * k, nbytes
        return 2.0 * out_elems * 256, nbytes
    if op in ("Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput",
              "Conv2DBackpropFilter"):
        filt = ins[1] if len(ins) > 1 else None
        if op == "Conv2DBackpropFilter":
            out_shape = ins[2] if len(ins) > 2 else None  # out_backprop
        elif op == "Conv2DBackpropInput":
            out_shape = ins[2] if len(ins) > 2 else None
        else:
            out_shape = outs[0]
        if filt is not None and len(filt) == 4 and _elements(filt) and _elements(out_shape):
            kh, kw, cin, _ = filt
            per_out = kh * kw * (1 if op == "DepthwiseConv2dNative" else cin)
            return 2.0 * _elements(out_shape) * per_out, nbytes
        return 2.0 * out_elems * 9 * 64, nbytes
    if op in ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin", "L2Loss",
              "BiasAddGrad", "AddN"):
        return float(in_elems), nbytes
    return float(out_elems * _ELEMENTWISE_WEIGHT.get(op, 1)), nbytes


def _num_outputs(node):
    try:
        return signature.num_outputs(node)
    except Exception:  # unknown op: one output is the common case
        return 1
