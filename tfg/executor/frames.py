"""Frames and iterations of the dataflow executor: the bookkeeping of TensorFlow's v1 control
flow (Enter/Exit/NextIteration), kept apart from the scheduling loop.

    root = Frame.root()                  # the step's outermost frame, iteration 0
    child = frames.child(root, 0, item)  # created by the first Enter into it
    child.iterations[0].pending          # node id -> inputs still awaited in iteration 0

Pending counts, dead counts and input slots live per iteration (dicts filled lazily from the
plan's initial counts), so iteration n+1 can start while n still runs, up to the frame's
`parallel_iterations`.
"""
import functools
import struct

_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1


def tf_hash64(data, seed=0xDECAFCAFFE):
    """TensorFlow's Hash64 of bytes (a 64-bit multiplicative hash, MurmurHash2-style)."""
    n = len(data)
    h = seed ^ ((n * _M) & _MASK)
    end = n - n % 8
    for (k,) in struct.iter_unpack("<Q", data[:end]):
        k = (k * _M) & _MASK
        k ^= k >> 47
        h ^= (k * _M) & _MASK
        h = (h * _M) & _MASK
    if end < n:
        h ^= int.from_bytes(data[end:], "little")
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    return h ^ (h >> 47)


def tf_hash64_combine(a, b):
    return a ^ ((b + 0x9E3779B97F4A7800 + ((a << 10) & _MASK) + (a >> 4)) & _MASK)


@functools.lru_cache(maxsize=4096)  # (a step creates its frames again: the same ids)
def tf_frame_id(parent_id, parent_iter, frame_name):
    """The id TensorFlow's executor gives a child frame, which rendezvous keys of Send/Recv
    inside loops carry (`...;frame_id:iter`): a loop split between tfg and TensorFlow workers
    must name its iterations alike on both.

    Before: the root frame (id 0), iteration 0, Enter frame_name "while/while_context".
    After:  18186195969791715286 (what a TensorFlow server puts in its keys).
    """
    name = frame_name if isinstance(frame_name, bytes) else frame_name.encode(
        "utf-8", "surrogateescape")
    return tf_hash64_combine(parent_id, tf_hash64_combine(parent_iter, tf_hash64(name)))


class Iteration:
    __slots__ = ("pending", "dead", "inputs", "outstanding_ops", "outstanding_frames")

    def __init__(self):
        self.pending = {}
        self.dead = {}
        self.inputs = {}
        self.outstanding_ops = 0
        self.outstanding_frames = 0


class Frame:
    __slots__ = ("path", "frame_id", "parent", "parent_iter", "max_parallel", "pending_inputs",
                 "iterations", "iteration_count", "outstanding_iterations", "next_iter_roots",
                 "inv_values", "dead_exits", "entered")

    def __init__(self, path, parent, parent_iter, max_parallel, pending_inputs):
        self.path = path
        # Partitions of one loop on several devices (and tasks, tfg's or TensorFlow's) name
        # the same frame the same way: the id (part of rendezvous keys) is TensorFlow's.
        self.frame_id = 0 if parent is None else tf_frame_id(
            parent.frame_id, parent_iter, path[len(parent.child_path(parent_iter, "")):])
        self.parent = parent
        self.parent_iter = parent_iter
        self.max_parallel = max_parallel
        self.pending_inputs = pending_inputs  # Enters of this frame instance not yet run
        self.iterations = {0: Iteration()}
        self.iteration_count = 0
        self.outstanding_iterations = 1
        self.next_iter_roots = []  # (item, value) deferred by parallel_iterations
        self.inv_values = []  # (item, value) of constant Enters: seen by every iteration
        self.dead_exits = []  # Exit items dead in the last iteration, delivered at the end
        # A compiled loop's Enter outputs, (item, value, is_dead), until all have arrived
        # (tfg/executor/loops.py); None for a frame the dataflow executor runs.
        self.entered = None

    @staticmethod
    def root():
        return Frame("", None, 0, 1, 0)

    def child_path(self, iteration, frame_name):
        name = frame_name.decode("utf-8", "surrogateescape") if isinstance(
            frame_name, bytes) else frame_name
        return f"{self.path};{iteration};{name}"

    def is_iteration_done(self, i):
        it = self.iterations.get(i)
        if it is None or it.outstanding_ops or it.outstanding_frames:
            return False
        if i == 0:
            return self.pending_inputs == 0
        return (i - 1) not in self.iterations

    @property
    def is_done(self):
        return self.pending_inputs == 0 and self.outstanding_iterations == 0

    def __repr__(self):
        return f"<Frame {self.path or '(root)'} iters={sorted(self.iterations)}>"
