"""How many cores other processes keep busy, measured, and the BLAS thread count that follows.

    >>> threads_for(cores=2, others=0.05)   # quiet machine: BLAS on both cores
    2
    >>> threads_for(cores=2, others=1.6)    # another job busy on a core: one BLAS thread
    1
    >>> adaptive_threads()                  # this machine now (re-measured every 0.25 s)

Why: OpenBLAS splits a GEMM over its threads and busy-waits for the slowest. When another
process holds a core, the thread that lands there is descheduled for whole time slices and the
call waits for it (a keras MobileNetV2 step measured 8x slower with 2 BLAS threads than with 1
on a loaded 2-core machine), while on a quiet machine the second thread is almost twice the
speed. So the count is chosen from what the other processes use now.

The measure (Linux): CPU time of the cores this process may run on (/proc/stat lines of
os.sched_getaffinity) minus this process's own CPU time (os.times: all its threads, spinning
BLAS threads included, so tfg never counts itself as load), over the wall time since the last
sample: "others" in cores. Samples are taken when a step starts, at most every WINDOW_S (the
kernel counts in 10 ms ticks: shorter windows are noise); between samples the last decision
holds. Before the first window, and where /proc/stat cannot be read, the 1-minute load average
less one (this process) stands in.
"""
import math
import os
import threading
import time

WINDOW_S = 0.25
# A core counts as taken when others use more than this share of it: background noise (a
# shell, a daemon waking up) stays under it, a busy process is near 1.
SLACK = 0.25


def usable_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_for(cores, others):
    """BLAS threads for `cores` usable cores while other processes keep `others` cores busy:
    the cores left free, at least 1. Before: (2, 0.05). After: 2. Before: (2, 0.9). After: 1."""
    taken = max(0, math.ceil(others - SLACK))
    return max(1, min(cores, cores - taken))


def _cpu_busy_s(cpus):
    """Busy seconds (all but idle and iowait) of the given cpus since boot, or None."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    busy = 0
    found = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        v = [int(x) for x in rest.split()]
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        busy += v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
        found += 1
    return busy / _TICKS if found else None


try:
    _TICKS = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):
    _TICKS = 100


def _own_cpu_s():
    t = os.times()
    return t.user + t.system


def _loadavg_others():
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except OSError:
        return 0.0


class ContentionMeter:
    """Samples the cores other processes use; `others()` -> the latest estimate in cores.

    `read_busy`, `read_own` and `clock` are injectable for tests (simulated load)."""

    def __init__(self, read_busy=None, read_own=_own_cpu_s, clock=time.monotonic,
                 fallback=_loadavg_others, window=WINDOW_S):
        if read_busy is None:
            try:
                cpus = os.sched_getaffinity(0)
            except (AttributeError, OSError):
                cpus = None
            read_busy = lambda: _cpu_busy_s(cpus)  # noqa: E731
        self.read_busy, self.read_own, self.clock = read_busy, read_own, clock
        self.fallback, self.window = fallback, window
        self.lock = threading.Lock()
        self.estimate = None
        self.last = self._sample()

    def _sample(self):
        return self.clock(), self.read_busy(), self.read_own()

    def others(self):
        """Cores kept busy by other processes (re-measured when a window has passed)."""
        with self.lock:
            now = self.clock()
            t0, busy0, own0 = self.last
            if now - t0 >= self.window:
                t1, busy1, own1 = self._sample()
                if busy0 is not None and busy1 is not None:
                    self.estimate = max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))
                self.last = (t1, busy1, own1)
            if self.estimate is None:
                return self.fallback()
            return self.estimate


_meter = None
_meter_lock = threading.Lock()


def meter():
    """The process-wide ContentionMeter."""
    global _meter
    with _meter_lock:
        if _meter is None:
            _meter = ContentionMeter()
        return _meter


def adaptive_threads(cores=None):
    """BLAS threads for a step starting now: the usable cores other processes leave free."""
    return threads_for(cores or usable_cores(), meter().others())
