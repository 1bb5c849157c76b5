"""The BLAS thread count chosen from measured contention (tfg/executor/contention.py), under
simulated load: a fake clock and fake CPU counters stand in for /proc/stat and os.times."""
import pytest

from tfg.executor import contention as C


@pytest.mark.parametrize("cores,others,want", [
    (2, 0.0, 2), (2, 0.3, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 3.5, 1),
    (8, 0.1, 8), (8, 2.0, 6), (8, 2.4, 6), (8, 2.6, 5), (8, 20.0, 1), (1, 0.0, 1),
])
def test_threads_are_the_cores_others_leave_free(cores, others, want):
    assert C.threads_for(cores, others) == want


class FakeMachine:
    """CPU counters that advance as simulated time passes: `others` cores busy elsewhere and
    `own` cores busy in this process (its own spinning BLAS threads included)."""

    def __init__(self):
        self.t = 100.0
        self.busy = self.own_s = 0.0

    def run(self, seconds, others, own):
        self.t += seconds
        self.busy += (others + own) * seconds
        self.own_s += own * seconds

    def meter(self, fallback=lambda: 0.5):
        return C.ContentionMeter(read_busy=lambda: self.busy, read_own=lambda: self.own_s,
                                 clock=lambda: self.t, fallback=fallback, window=0.25)


def step(m, meter, seconds, others, own):
    meter.start()
    m.run(seconds, others, own)
    meter.stop()


def test_meter_counts_other_processes_not_this_one():
    m = FakeMachine()
    meter = m.meter()
    step(m, meter, 0.5, others=0.0, own=2.0)  # tfg alone, both cores busy (BLAS spinning too)
    assert meter.others() == pytest.approx(0.0)
    assert C.threads_for(2, meter.others()) == 2
    step(m, meter, 0.5, others=2.0, own=0.5)  # `--load 2`: two busy processes beside tfg
    assert meter.others() == pytest.approx(2.0)
    assert C.threads_for(2, meter.others()) == 1
    step(m, meter, 0.5, others=0.05, own=1.0)  # the load went away: the next window says so
    assert meter.others() == pytest.approx(0.05)
    assert C.threads_for(2, meter.others()) == 2


def test_time_between_steps_does_not_count():
    m = FakeMachine()
    meter = m.meter()
    for _ in range(10):  # TensorFlow's step between tfg's (A B A B): both cores, not at once
        m.run(0.1, others=2.0, own=0.0)
        step(m, meter, 0.05, others=0.0, own=2.0)
    assert meter.others() == pytest.approx(0.0)
    assert C.threads_for(2, meter.others()) == 2


def test_steps_accumulate_to_a_window_and_the_estimate_holds_meanwhile():
    m = FakeMachine()
    meter = m.meter(fallback=lambda: 1.5)
    step(m, meter, 0.1, others=1.0, own=1.0)
    assert meter.others() == 1.5  # less than a window of step time yet: the stand-in
    step(m, meter, 0.2, others=0.0, own=1.0)  # 0.3 s of steps: (0.1 * 1.0) / 0.3
    assert meter.others() == pytest.approx(1 / 3)
    step(m, meter, 0.1, others=2.0, own=0.0)  # within the next window: the estimate holds
    assert meter.others() == pytest.approx(1 / 3)


def test_tiny_steps_are_sampled_sparsely():
    m = FakeMachine()
    reads = []
    meter = C.ContentionMeter(read_busy=lambda: reads.append(1) or m.busy,
                              read_own=lambda: m.own_s, clock=lambda: m.t, window=0.25)
    step(m, meter, 0.001, others=0.0, own=1.0)
    n = len(reads)
    for _ in range(100):  # 100 steps of 1 ms back to back: at most every 50 ms is sampled
        step(m, meter, 0.001, others=0.0, own=1.0)
    assert len(reads) - n <= 2 * (0.1 / 0.05 + 1)


def test_meter_without_proc_stat_uses_the_fallback():
    m = FakeMachine()
    meter = C.ContentionMeter(read_busy=lambda: None, read_own=lambda: m.own_s,
                              clock=lambda: m.t, fallback=lambda: 3.0, window=0.25)
    step(m, meter, 1.0, others=0.0, own=1.0)
    assert meter.others() == 3.0
    assert C.threads_for(2, meter.others()) == 1


def test_the_real_meter_reads_this_machine():
    meter = C.ContentionMeter(window=0.0)
    meter.start()
    sum(range(10 ** 5))
    meter.stop()
    assert meter.others() >= 0.0
    assert 1 <= C.adaptive_threads() <= C.usable_cores()
