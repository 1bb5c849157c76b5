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

Where the meter gives one thread (other processes busy) on a machine of two cores or more,
the trial runs the other way: two threads are timed against one, and taken only where the
median of their steps is BUSY_MARGIN faster (medians: there the scheduler's share moves a
step's time both ways), after a full first trial (their first steps may be slow once). The
scheduler shares the cores among threads, not processes, so a step whose kernels split well
gets more of a busy machine on two threads: under `--load 2` the cnn row took 21.9 ms on two
against 31-33 on one, while the MLP and the keras models lost 11-74% on two (stop 41,
benchmarks/results/suite-s41-load2.json). A probe of two threads that keeps one doubles the
wait for the next (REPROBE up to MAX_REPROBE steps), so a step that is much slower on two
(OpenBLAS's threads waiting for each other) costs little.

The steps of the trial are real steps (their results are the results); OpenBLAS's one- and
two-thread sums can differ in the last bits, as between any two adaptive steps.
$TFG_BLAS_TRIAL=0 turns the trial off (the meter alone decides, as before stop 32).
"""
import os
import statistics
import threading

from tfg.executor import blas_floor
from tfg.executor.blas import ADAPTIVE
from tfg.executor.blas_floor import adaptive_count
from tfg.executor.contention import choices
from tfg.kernels import onednn

ENV_VAR = "TFG_BLAS_TRIAL"
TRIAL = 3  # timed steps per count before a choice (their min, or median when busy)
REPROBE = 64  # steps on the chosen count before the other is timed again
# ... at most, where probes of two threads on a busy machine keep one (each doubles it)
MAX_REPROBE = 1024
# One thread replaces the meter's n only when at least this much faster. 5% let a noisy
# trial switch keras NASNetMobile to one thread in a quiet suite run (stop 38: 16.1 ms where
# two fixed threads took 13.8); not switching costs at most this much.
MARGIN = 0.10
# Two threads replace one on a busy machine only when at least this much faster: there a
# trial's three steps per count move by 20-30% with the scheduler's share (MobileNetV2 took
# two threads on 10% in one `--load 2` run, and was 1.23x its one-thread time), while the
# cnn row, the one that gains there, is 1.3-1.5x faster on two.
BUSY_MARGIN = 0.25
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
    """The trial of one feed signature: recent step times per count, and the choice.
    `n` is the meter's count, `alt` the count it is timed against (1 below a count of two
    or more; two where the meter gives one thread, see ThreadTrial.limit). `alt` is taken
    only where it is faster by MARGIN (BUSY_MARGIN for two threads), and is not timed again
    after CLEAR_STEPS steps that were CLEAR slower."""

    __slots__ = ("n", "alt", "times", "choice", "since", "warm", "reprobe")

    def __init__(self, n, alt=1):
        self.n = n  # the meter's count
        self.alt = alt
        self.times = {alt: [], n: []}
        self.choice = None
        self.since = 0
        self.warm = 0  # steps run before the trial (WARM_STEPS): not timed
        self.reprobe = REPROBE  # steps on the choice before the other count is timed again

    def next_count(self):
        if self.choice is not None and self.since < self.reprobe:
            self.since += 1
            return self.choice
        # trying: the count with fewer fresh times (n first: the meter's own choice)
        fresh = {k: len(v) for k, v in self.times.items()}
        return self.n if fresh[self.n] <= fresh[self.alt] else self.alt

    def add(self, count, seconds):
        times = self.times[count]
        times.append(seconds)
        del times[:-TRIAL]
        if self.choice is not None and self.since < self.reprobe:
            return
        alt = self.alt
        other = alt if count == self.n else self.n
        if not self.times[other] or (self.choice is not None and count == self.choice):
            return
        busy = alt > self.n  # more threads than the meter's count: a busy machine
        # fastest steps compared on a quiet machine (noise there only adds time); medians on
        # a busy one, where the scheduler's share moves a step's time both ways
        fast = statistics.median_low if busy else min
        fast_n, fast_alt = fast(self.times[self.n]), fast(self.times[alt])
        # (on a busy machine the first trial is a full one, since the first steps on two
        # threads may be slow once, as the meter's count's are in the other direction)
        clear = not busy or self.choice is not None
        if (clear and len(self.times[alt]) >= CLEAR_STEPS and fast_alt > fast_n * (1 + CLEAR)) \
                or (len(times) >= TRIAL and len(self.times[other]) >= TRIAL):
            margin = BUSY_MARGIN if busy else MARGIN
            self.choice = alt if fast_alt < fast_n * (1 - margin) else self.n
            self.since = 0
            if busy:
                # more threads than the meter's count, on a busy machine: each probe that
                # keeps the meter's count waits twice as long for the next (a probe step
                # there may be much slower: OpenBLAS's threads wait for each other)
                self.reprobe = (REPROBE if self.choice == alt
                                else min(MAX_REPROBE, 2 * self.reprobe))
            # the other count's times are stale by the next probe: it is timed afresh
            self.times[alt if self.choice == self.n else self.n] = []


class ThreadTrial:
    """Per prepared step: see the module docstring."""

    def __init__(self):
        self.signatures = {}  # feed shapes -> _Signature
        self.lock = threading.Lock()

    def limit(self, limit, feed_values):
        """(limit for one step, ticket for `record`): `limit` itself unless it is ADAPTIVE
        and the process may use two cores or more; then ADAPTIVE (the meter's count) or the
        count it is timed against (1, or 2 where the meter gives one), as the trial says.
        The ticket is None for a step the trial does not time."""
        if limit != ADAPTIVE or not enabled():
            return limit, None
        n = adaptive_count()
        if n < 2:
            if blas_floor.usable_cores() < 2:
                return limit, None
            alt = 2  # other processes busy: is this step faster on two threads anyway?
        else:
            alt = 1
        key = tuple(getattr(v, "shape", None) for v in feed_values)
        with self.lock:
            sig = self.signatures.get(key)
            if sig is None or sig.n != n:
                if len(self.signatures) >= _MAX_SIGNATURES:
                    self.signatures.clear()
                sig = self.signatures[key] = _Signature(n, alt)
            if sig.warm < WARM_STEPS:
                sig.warm += 1
                return limit, None
            count = sig.next_count()
        made = onednn.kernels_made()
        if count == n:
            return limit, (key, n, made)
        choices[f"{count} (trial)"] += 1  # what the benchmarks report as adaptive's choices
        return count, (key, count, made)

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
