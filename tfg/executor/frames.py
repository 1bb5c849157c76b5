"""Frames and iterations of the dataflow executor: the bookkeeping of TensorFlow's v1 control
flow (Enter/Exit/NextIteration), kept apart from the scheduling loop.

    root = Frame.root()                  # the step's outermost frame, iteration 0
    child = frames.child(root, 0, item)  # created by the first Enter into it
    child.iterations[0].pending          # node id -> inputs still awaited in iteration 0

Pending counts, dead counts and input slots live per iteration (dicts filled lazily from the
plan's initial counts), so iteration n+1 can start while n still runs, up to the frame's
`parallel_iterations`.
"""
import hashlib


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
        # Partitions of one loop on several devices name the same frame the same way, so the
        # id (part of rendezvous keys) must be a stable function of the path.
        self.frame_id = 0 if parent is None else int.from_bytes(
            hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).digest(),
            "little") >> 1
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
