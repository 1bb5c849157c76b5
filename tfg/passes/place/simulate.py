"""The white paper's greedy placement: simulate the graph's execution in topological order with
the cost model, and put each colocation group on the device where it would finish first.

A node's finish time on device d is max(d free, every input ready on d) + its compute time on
d, where an input from another device is ready after its producer finished plus the copy time
(bytes / bandwidth + latency). Devices run one op at a time in the simulation, so independent
work spreads over devices while a chain stays where its data is.

    >>> where = simulate(graph, groups, devices, CostModel(), shapes)
    >>> where["big_matmul"]                  # 4096x4096 MatMul, CPU:0 and GPU:0 available
    '/job:localhost/replica:0/task:0/device:GPU:0'

Heuristics for nodes that placement may move freely (one node, no request), as in TensorFlow:
a generator (no data inputs, one output) goes with its consumers when they share one device; Shape,
Size and Rank go with their input; Switch and Exit with their data input; Enter and
NextIteration with their first consumer (so one loop frame's skeleton stays on one device).
And two of tfg's: a node reading a reference variable's buffer that the graph writes in place
goes with the buffer (tfg/passes/variable_buffers.py), so it sees the buffer as it is when it
runs; and the nodes of a while loop that ask for no device (its whole nest, inner loops
included; colocation groups whose members are all in it) go to ONE device, the one where the
loop's nodes cost least in sum (a node that cannot run there counts a copy in and out): the
simulation sees one iteration, but every iteration would pay each border crossing again, and
spreading a loop's independent ops over devices only pays off once.

    Before: a Keras LSTM on cpu:1,gpu:1: its cell's Sigmoids on GPU:0, its Tanhs on CPU:0,
            ~20 _Send/_Recv pairs an iteration (53 ms a step on an H200 machine).
    After:  the whole loop on one device, no crossing inside it.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.frames_loops import assign_frames
from tfg.graphdef.names import CONTROL, DeviceSpec
from tfg.passes.place.colocation import UnionFind
from tfg.passes.variable_buffers import buffer_holders, buffer_inputs
from tfg.schemas.ops import control_flow_names, ops_with, signature

SHAPE_OPS = ops_with("shape_metadata")
FOLLOW_INPUT_OPS = control_flow_names("switch", "exit")
FOLLOW_CONSUMER_OPS = control_flow_names("enter", "next_iteration")


def _num_outputs(node):
    try:
        return signature.num_outputs(node)
    except Exception:  # an op without a signature: treat as one output
        return 1


def _is_generator(node):
    # Data inputs only, as TensorFlow's IsGeneratorNode (num_inputs): a Const gated into a
    # loop frame by a control input still goes with its consumers (a dilated conv's
    # block_shape sent to another device reaches BatchToSpaceND through a _Recv of unknown
    # shape, which TensorFlow's shape function refuses at import).
    return not node.data_inputs and _num_outputs(node) == 1 and not _ref_output(node)


def _ref_output(node):
    try:
        return any(dt.is_ref for dt in signature.output_dtypes(node))
    except Exception:
        return False


class _Sim:
    def __init__(self, graph, groups, cost_model, shapes, keep_loops=True):
        self.graph = graph
        self.groups = groups
        self.cm = cost_model
        self.shapes = shapes
        self.finish = {}  # node -> simulated finish time (us)
        self.where = {}  # node -> device
        self.free = {}  # device -> time it is next idle
        self.deferred = {}  # node -> "generator" | "consumer"
        self._costs = {}  # (node, device type) -> us
        self._bytes = {}  # (node, port) -> bytes
        self._copies = {}  # (src device, dst device) -> Link
        self.holders = buffer_holders(graph)  # nodes whose outputs may be a variable's buffer
        self.keep_loops = keep_loops
        self.loop_of = {}  # node -> the outermost loop frame it runs in (loop_affinity)
        self.loop_device = {}  # outermost frame -> the device its free nodes go to

    def device_type(self, device):
        return device.rsplit("/device:", 1)[-1].split(":")[0]

    def cost(self, node, device):
        key = (node.name, self.device_type(device))
        if key not in self._costs:
            self._costs[key] = self.cm.compute_us(node, key[1], self.shapes)
        return self._costs[key]

    def copy_us(self, ref, src_device, device):
        if ref.port == CONTROL:
            nbytes = 0
        else:
            key = (ref.node, ref.port)
            if key not in self._bytes:
                self._bytes[key] = self.cm.output_bytes(self.graph[ref.node], ref.port,
                                                        self.shapes)
            nbytes = self._bytes[key]
        link = self._copies.get((src_device, device))
        if link is None:
            link = self._copies[(src_device, device)] = self.cm.link(src_device, device)
        return link.time_us(nbytes)

    def source(self, ref):
        """(ready time, device or None) of the producer of `ref`; None when not simulated yet
        (a back edge). Deferred producers are looked through: they will move to a consumer.
        A loop, not recursion: a chain of 1,000 nested Enters was a RecursionError."""
        seen = set()
        while True:
            kind = self.deferred.get(ref.node)
            if kind == "generator":
                return 0.0, None
            if kind != "consumer":
                break
            data = self.graph[ref.node].data_inputs
            if not data or ref.node in seen:
                return 0.0, None
            seen.add(ref.node)
            ref = data[0]
        if ref.node not in self.finish:
            return None
        return self.finish[ref.node], self.where[ref.node]

    def ready_on(self, node, device):
        ready = 0.0
        for ref in node.input_refs:
            src = self.source(ref)
            if src is None:
                continue
            t, dev = src
            if dev is not None and dev != device:
                t += self.copy_us(ref, dev, device)
            ready = max(ready, t)
        return ready

    def choose(self, node, group):
        """The candidate where the group would finish first (ties: the earlier device)."""
        best, best_t = None, None
        for device in group.candidates:
            start = max(self.ready_on(node, device), self.free.get(device, 0.0))
            t = start + sum(self.cost(self.graph[m], device) for m in group.members)
            if best_t is None or t < best_t - 1e-9:
                best, best_t = device, t
        return best

    def loop_affinity(self, order):
        """Map every node inside a while loop to its outermost frame, nests joined by a
        colocation group counting as one (no loops, or frames that do not validate: none;
        placement then runs as for straight-line graphs)."""
        try:
            _, frame_of = assign_frames(self.graph, order)
        except TfgInputError:
            return
        for name, frame in frame_of.items():
            if frame is not None:
                while frame.parent is not None:
                    frame = frame.parent
                self.loop_of[name] = frame
        # Nests that share a colocation group go together: a forward loop's StackPushV2 and
        # its gradient loop's StackPopV2 use one stack.
        nests = UnionFind()
        for group in self.groups:
            mine = [self.loop_of[m] for m in group.members if m in self.loop_of]
            for other in mine[1:]:
                nests.union(mine[0], other)
        if nests.parent:
            self.loop_of = {name: nests.find(f) for name, f in self.loop_of.items()}

    def frame_device(self, frame, group):
        """The device the free nodes of loop nest `frame` go to (chosen at its first free node:
        the candidate where its nodes cost least in sum)."""
        device = self.loop_device.get(frame)
        if device is None:
            members = [self.graph[n] for n, f in self.loop_of.items() if f is frame]
            best_t = None
            for d in group.candidates:
                t = self.free.get(d, 0.0)  # (a second loop nest may go where work is not)
                for m in members:
                    if d in self.groups.of(m.name).candidates:
                        t += self.cost(m, d)
                    else:  # runs elsewhere: a copy in and one out, each iteration
                        t += 2 * self.cm.link(d, self.groups.of(m.name).candidates[0]).latency_us
                if best_t is None or t < best_t - 1e-9:
                    device, best_t = d, t
            self.loop_device[frame] = device
        return device if device in group.candidates else None

    def loop_pick(self, node, group):
        """The device of the loop nest the members of `group` run in (members outside loops,
        a TF1 TensorArray made before its loop, go along), or None (not in a loop, members in
        two nests, or a device asked for by name)."""
        if group.request != DeviceSpec() or len(group.candidates) < 2:
            return None
        nests = {self.loop_of.get(m) for m in group.members} - {None}
        if len(nests) != 1:  # not in a loop, or colocated across two loop nests
            return None
        return self.frame_device(nests.pop(), group)

    def heuristic(self, node, group):
        """A device forced by the heuristics in the module docstring, or None."""
        if node.op in SHAPE_OPS or node.op in FOLLOW_INPUT_OPS:
            data = node.data_inputs
            src = self.source(data[0]) if data else None
            if src is not None and src[1] in group.candidates:
                return src[1]
        return None

    def buffer_pick(self, node, group):
        """The device of the variable buffer `node` reads, where the graph writes that buffer
        in place (it must see the buffer as it is), or None."""
        for ref in buffer_inputs(self.graph, node, self.holders) if self.holders else ():
            src = self.source(ref)
            if src is not None and src[1] in group.candidates:
                return src[1]
        return None

    def run(self, order):
        if self.keep_loops:
            self.loop_affinity(order)
        for node in order:
            group = self.groups.of(node.name)
            free_node = not group.constrained and len(group.candidates) > 1
            if free_node and node.op in FOLLOW_CONSUMER_OPS:
                self.deferred[node.name] = "consumer"
                continue
            if free_node and _is_generator(node):
                self.deferred[node.name] = "generator"
                continue
            if group.device is None:
                if len(group.candidates) == 1:
                    group.device = group.candidates[0]
                else:
                    group.device = (self.buffer_pick(node, group) if free_node else None) \
                        or self.loop_pick(node, group) \
                        or (self.heuristic(node, group) if free_node else None) \
                        or self.choose(node, group)
            device = group.device
            start = max(self.ready_on(node, device), self.free.get(device, 0.0))
            self.finish[node.name] = start + self.cost(node, device)
            self.free[device] = self.finish[node.name]
            self.where[node.name] = device
        # Deferred nodes follow their consumers, the last consumers first.
        for node in reversed(order):
            if node.name in self.deferred:
                self.where[node.name] = self.resolve(node)
                self.groups.of(node.name).device = self.where[node.name]
        return self.where

    def resolve(self, node):
        candidates = self.groups.of(node.name).candidates
        consumers = [c for c, _ in self.graph.consumers(node.name)]
        devices = [self.where[c.name] for c in consumers if c.name in self.where]
        if self.deferred[node.name] == "generator" and devices and len(set(devices)) == 1 \
                and devices[0] in candidates:
            return devices[0]
        for d in devices:  # Enter/NextIteration: the first consumer; generators: likewise
            if d in candidates:
                return d
        src = self.source(node.data_inputs[0]) if node.data_inputs else None
        if src is not None and src[1] in candidates:
            return src[1]
        return candidates[0]


def simulate(graph, groups, cost_model, shapes, keep_loops=True):
    """Device of every node: {name: full device name} (see module docstring); keep_loops=False
    places a loop's nodes one by one, as straight-line work."""
    return _Sim(graph, groups, cost_model, shapes, keep_loops).run(graph.topo_order())
