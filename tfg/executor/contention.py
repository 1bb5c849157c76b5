"""How many cores other processes keep busy, measured, and the BLAS thread count that follows.

    >>> threads_for(cores=2, others=0.05)   # quiet machine: BLAS on both cores
    2
    >>> threads_for(cores=2, others=0.9)    # another job busy on a core: one BLAS thread
    1
    >>> adaptive_threads()                  # this machine now (measured during steps)

Why: OpenBLAS splits a GEMM over its threads and busy-waits for the slowest. When another
process holds a core, the thread that lands there is descheduled for whole time slices and the
call waits for it (a keras MobileNetV2 step measured 8x slower with 2 BLAS threads than with 1
on a loaded 2-core machine), while on a quiet machine the second thread is almost twice the
speed. So the count is chosen from what the other processes use now.

The measure (Linux): CPU time of the cores this process may run on (/proc/stat lines of
os.sched_getaffinity) minus this process's own CPU time (os.times: all its threads, spinning
BLAS threads included, so tfg never counts itself as load), over the wall time of tfg's steps
only: "others" in cores. Step time accumulates to WINDOW_S before the estimate is renewed (the
kernel counts in 10 ms ticks: shorter windows are noise); meanwhile the last decision holds.
Before the first window, and where /proc/stat cannot be read, the 1-minute load average less
one (this process) stands in.
"""
import collections
import math
import os
import threading
import time

WINDOW_S = 0.25
# A core counts as taken when others use more than this share of it: background noise (a
# shell, a daemon waking up) stays under it, a busy process is near 1. Between, the BLAS
# trial (blas_trial.py) times one thread against two. At 0.25, a quiet suite run measured
# 0.19-0.3 from TensorFlow's worker, whose threads spin on into the tfg step after its own,
# and gave the MLP one thread for 6-8 of its 18 steps (default/best 1.22-1.33; stop 38).
SLACK = 0.5


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
    """Other processes' CPU use while this process's steps run; `others()` -> cores.

    blas_limit calls `start()` when the first concurrent step begins and `stop()` when the last
    ends: only time inside steps counts, so a process that alternates with tfg (TensorFlow in
    the A B A B benchmarks, a data loader) is not mistaken for one competing with it. Step
    time accumulates until `window` seconds, then the estimate is renewed. A step is sampled
    (two reads of /proc/stat, 30-100 µs each) when the previous one took >= 20 ms or 50 ms
    have passed since the last sample: short steps pay nearly nothing (sampling every step
    cost a 4 ms LSTM step 5%). `read_busy`, `read_own` and `clock`
    are injectable for tests (simulated load)."""

    MIN_GAP_S, CHEAP_STEP_S = 0.05, 0.02

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
        self.open = None  # (t, busy, own) at the start of the sampled step running now
        self.acc_s = self.acc_others = 0.0
        self.last_end = -1e9
        self.last_step_s = 1.0
        self.started = None

    def start(self):
        """A step begins (the first of any running concurrently)."""
        with self.lock:
            now = self.clock()
            self.started = now
            if self.last_step_s < self.CHEAP_STEP_S and now - self.last_end < self.MIN_GAP_S:
                return
            busy = self.read_busy()
            self.open = (now, busy, self.read_own()) if busy is not None else None

    def stop(self):
        """The last running step ended."""
        with self.lock:
            now = self.clock()
            if self.started is not None:
                self.last_step_s = now - self.started
                self.started = None
            if self.open is None:
                return
            t0, busy0, own0 = self.open
            self.open = None
            busy = self.read_busy()
            self.last_end = now
            if busy is None:
                return
            self.acc_s += now - t0
            self.acc_others += max(0.0, (busy - busy0) - (self.read_own() - own0))
            if self.acc_s >= self.window:
                self.estimate = self.acc_others / self.acc_s
                self.acc_s = self.acc_others = 0.0

    def others(self):
        """Cores other processes kept busy during this process's recent steps."""
        with self.lock:
            return self.fallback() if self.estimate is None else self.estimate


_meter = None
# How often each count was chosen in this process (benchmarks report it).
choices = collections.Counter()
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
    n = threads_for(cores or usable_cores(), meter().others())
    choices[n] += 1
    return n
