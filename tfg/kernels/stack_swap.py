"""Memory swapping of while-loop stacks ("Implementation of Control Flow in TensorFlow",
gradients of while loops; TensorFlow's `while_loop(swap_memory=True)`): a value a
`StackPushV2` with `swap_memory=true` pushes from a GPU is copied to host memory on a
background thread while the forward loop goes on, and its device memory is let go; the
backward loop's `StackPopV2` of one entry starts bringing the next entry (the one below) back
to the device, so the copy overlaps the iteration's compute. On a CPU (or for a value already
in host memory) it is a no-op: the entry stays as it is.

    forward:  push(e0) push(e1) push(e2)   -> e0, e1 copied out behind the loop; e2 too
    backward: pop() = e2 (back in)  -> e1 starts coming back; pop() = e1 -> e0 starts; ...

One thread copies out and one copies in (an in-copy waits for its entry's out-copy: never
the same thread, so never a wait on itself). STATS counts the moves, for tests and traces.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

from tfg.kernels.memory import is_device_array, to_device, to_host

_OUT = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfg-swap-out")
_IN = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfg-swap-in")
STATS = {"out": 0, "in": 0, "prefetched": 0}
_stats_lock = threading.Lock()


def _count(key):
    with _stats_lock:
        STATS[key] += 1


def reset_stats():
    with _stats_lock:
        for key in STATS:
            STATS[key] = 0


class Swapped:
    """A stack entry on its way to host memory and back (see the module docstring)."""

    __slots__ = ("xp", "device", "host", "lock", "out", "back")

    def __init__(self, xp, value):
        self.xp = xp
        self.device = value
        self.host = None
        self.back = None
        self.lock = threading.Lock()
        self.out = _OUT.submit(self._copy_out)

    def _copy_out(self):
        host = to_host(self.device)
        with self.lock:
            self.host = host
            if self.back is None:  # not wanted back yet: the device memory goes now
                self.device = None
        _count("out")

    def prefetch(self):
        """Start bringing the entry back to the device (once)."""
        with self.lock:
            if self.back is None:
                self.back = _IN.submit(self._copy_in)
                return True
        return False

    def _copy_in(self):
        self.out.result()
        with self.lock:
            if self.device is not None:  # popped before it ever left
                return self.device
        value = to_device(self.xp, self.host)
        _count("in")
        return value

    @property
    def on_host(self):
        """True once the entry's device memory was let go."""
        with self.lock:
            return self.device is None and self.host is not None

    def value(self):
        self.prefetch()
        return self.back.result()


def swap_out(xp, value):
    """What a swap_memory push keeps: a Swapped for a device array, else `value` itself."""
    if not is_device_array(value):
        return value
    return Swapped(xp, value)


def swap_in(stack, value):
    """The popped entry on the device, after starting to bring back the next one."""
    if stack.items and type(stack.items[-1]) is Swapped and stack.items[-1].prefetch():
        _count("prefetched")
    return value.value() if type(value) is Swapped else value
