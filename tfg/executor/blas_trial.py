"""The 'adaptive' BLAS setting checked against the step's own time: one thread where the
free cores do not make this step faster.

    >>> trial = ThreadTrial()                       # once per prepared step
    >>> limit, ticket = trial.limit(ADAPTIVE, feed_values)  # every step: ADAPTIVE, or 1
    >>> trial.record(ticket, seconds)               # after it, with the step's wall time

Why: the contention meter (contention.py) says how many cores other processes leave free,
not whether a step gains from them; that depends on the step's GEMM sizes, the Python between
them and the host. On the AVX2 host of stop 32 (OpenBLAS's Haswell kernels), quiet, one
sitting with TensorFlow's steps alternating (`benchmarks/bench_keras.py`, medians):
NASNetMobile 44.2 ms on two threads against 36.7 on one, InceptionV3 45.7 against 39.5,
ResNet50 66.7 against 68.4 (for 101 against 67 ms of CPU), while the MLP's large GEMMs run
1.7x faster on two. So where the meter allows n > 1 threads, each prepared step (per feed
signature) times its steps on n and on 1, alternately, TRIAL steps each after its first
WARM_STEPS (which fill caches and settle; nor is a step timed that made oneDNN's kernels
for a new team size, which took a NASNetMobile step from 25 to 64 ms), and takes one thread
only where its fastest step beats n's by MARGIN (the meter's count stays where the two are
within noise: a wrong switch from a few noisy steps costs more than it saves), or keeps n
after CLEAR_STEPS steps of one thread that were CLEAR slower; it tries the other count again
every REPROBE steps and whenever the meter's count changes, so a change in load or input is
followed.
Steps the meter gives one thread are not timed here.

The steps of the trial are real steps (their results are the results); OpenBLAS's one- and
two-thread sums can differ in the last bits, as between any two adaptive steps.
$TFG_BLAS_TRIAL=0 turns the trial off (the meter alone decides, as before stop 32).
"""
import os
import threading

from tfg.executor.blas import ADAPTIVE
from tfg.executor.blas_floor import adaptive_count
from tfg.executor.contention import choices
from tfg.kernels import onednn

ENV_VAR = "TFG_BLAS_TRIAL"
TRIAL = 3  # timed steps per count before a choice (min of them: noise only adds time)
REPROBE = 64  # steps on the chosen count before the other is timed again
# One thread replaces the meter's n only when at least this much faster. 5% let a noisy
# trial switch keras NASNetMobile to one thread in a quiet suite run (stop 38: 16.1 ms where
# two fixed threads took 13.8); not switching costs at most this much.
MARGIN = 0.10
# Steps of a signature not timed before the trial: the first fills caches, and the next few
# are still settling (a NASNetMobile Session's steps 3-6: 17-22 ms, then 15-16). With the
# counts alternating, a drift down favours the count timed last; min-of-TRIAL does not
# undo it.
WARM_STEPS = 3
# One thread this much slower than the meter's count in its first timed steps is not timed
# again: the meter's count stays (the MLP's step on one thread: 1.35x its two-thread time;
# each probe of it is a step that much slower, at the trial and every REPROBE steps). Not
# the other way: a slow step on n threads may be a one-time cost (the Session's second step
# loads compiled loops, kernels for a new team size are made at their first call), and a
# wrong switch to one thread would cost REPROBE steps; one thread needs the full trial.
CLEAR = 0.15
# ... in the fastest of this many timed steps: one step is not enough, a model's steps on
# this 2-core VM vary by 25-50% from one second to the next (NASNetMobile: 20 to 36 ms);
# one step 1.26x slower kept two threads, 1.1x slower than one, in a suite run. With two,
# the threshold is lower: the MLP's one-thread steps were 1.2-1.27x in stop 36's runs.
CLEAR_STEPS = 2
_MAX_SIGNATURES = 8


def enabled():
    return os.environ.get(ENV_VAR) != "0"


class _Signature:
    """The trial of one feed signature: recent step times per count, and the choice."""

    __slots__ = ("n", "times", "choice", "since", "warm")

    def __init__(self, n):
        self.n = n  # the meter's count this trial compares with one thread
        self.times = {1: [], n: []}
        self.choice = None
        self.since = 0
        self.warm = 0  # steps run before the trial (WARM_STEPS): not timed

    def next_count(self):
        if self.choice is not None and self.since < REPROBE:
            self.since += 1
            return self.choice
        # trying: the count with fewer fresh times (n first: the meter's own choice)
        fresh = {k: len(v) for k, v in self.times.items()}
        return self.n if fresh[self.n] <= fresh[1] else 1

    def add(self, count, seconds):
        times = self.times[count]
        times.append(seconds)
        del times[:-TRIAL]
        if self.choice is not None and self.since < REPROBE:
            return
        other = 1 if count == self.n else self.n
        if not self.times[other] or (self.choice is not None and count == self.choice):
            return
        fast_n, fast_1 = min(self.times[self.n]), min(self.times[1])
        if (len(self.times[1]) >= CLEAR_STEPS and fast_1 > fast_n * (1 + CLEAR)) or (
                len(times) >= TRIAL and len(self.times[other]) >= TRIAL):
            self.choice = 1 if fast_1 < fast_n * (1 - MARGIN) else self.n
            self.since = 0
            # the other count's times are stale by the next probe: it is timed afresh
            self.times[1 if self.choice == self.n else self.n] = []


class ThreadTrial:
    """Per prepared step: see the module docstring."""

    def __init__(self):
        self.signatures = {}  # feed shapes -> _Signature
        self.lock = threading.Lock()

    def limit(self, limit, feed_values):
        """(limit for one step, ticket for `record`): `limit` itself unless it is ADAPTIVE
        and the meter allows two or more threads; then ADAPTIVE or 1, as the trial says.
        The ticket is None for a step the trial does not time."""
        if limit != ADAPTIVE or not enabled():
            return limit, None
        n = adaptive_count()
        if n < 2:
            return limit, None
        key = tuple(getattr(v, "shape", None) for v in feed_values)
        with self.lock:
            sig = self.signatures.get(key)
            if sig is None or sig.n != n:
                if len(self.signatures) >= _MAX_SIGNATURES:
                    self.signatures.clear()
                sig = self.signatures[key] = _Signature(n)
            if sig.warm < WARM_STEPS:
                sig.warm += 1
                return limit, None
            count = sig.next_count()
        made = onednn.kernels_made()
        if count == 1:
            choices["1 (trial)"] += 1  # what the benchmarks report as adaptive's choices
            return 1, (key, 1, made)
        return limit, (key, n, made)

    def record(self, ticket, seconds):
        """After a step: its wall time, with the ticket `limit()` gave for it."""
        if ticket is None:
            return
        key, count, made = ticket
        if onednn.kernels_made() != made:
            return  # it made oneDNN kernels (the first step on a new team size): not timed
        with self.lock:
            sig = self.signatures.get(key)
            if sig is not None and count in sig.times:
                sig.add(count, seconds)
