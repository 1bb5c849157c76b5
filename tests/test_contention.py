"""The BLAS thread count chosen from measured contention (tfg/executor/contention.py), under
simulated load: a fake clock and fake CPU counters stand in for /proc/stat and os.times."""
import pytest

from tfg.executor import contention as C


@pytest.mark.parametrize("cores,others,want", [
    (2, 0.0, 2), (2, 0.2, 2), (2, 0.3, 1), (2, 1.0, 1), (2, 3.5, 1),
    (8, 0.1, 8), (8, 2.0, 6), (8, 2.2, 6), (8, 2.3, 5), (8, 20.0, 1), (1, 0.0, 1),
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


def test_meter_counts_other_processes_not_this_one():
    m = FakeMachine()
    meter = m.meter()
    m.run(0.5, others=0.0, own=2.0)  # tfg alone, both cores busy (BLAS spinning included)
    assert meter.others() == pytest.approx(0.0)
    assert C.threads_for(2, meter.others()) == 2
    m.run(0.5, others=2.0, own=0.0)  # `--load 2`: two busy processes, tfg between steps
    assert meter.others() == pytest.approx(2.0)
    assert C.threads_for(2, meter.others()) == 1
    m.run(1.0, others=0.05, own=1.0)  # the load went away: the next window says so
    assert meter.others() == pytest.approx(0.05)
    assert C.threads_for(2, meter.others()) == 2


def test_meter_keeps_its_estimate_within_a_window_and_falls_back_before_the_first():
    m = FakeMachine()
    meter = m.meter(fallback=lambda: 1.5)
    m.run(0.1, others=0.0, own=1.0)
    assert meter.others() == 1.5  # no full window yet: the load-average stand-in
    m.run(0.2, others=1.0, own=1.0)  # 0.3 s since the first sample
    first = meter.others()
    assert first == pytest.approx(2 / 3)
    m.run(0.1, others=0.0, own=2.0)  # within the next window: the last estimate holds
    assert meter.others() == first


def test_meter_without_proc_stat_uses_the_fallback():
    m = FakeMachine()
    meter = C.ContentionMeter(read_busy=lambda: None, read_own=lambda: m.own_s,
                              clock=lambda: m.t, fallback=lambda: 3.0, window=0.25)
    m.run(1.0, others=0.0, own=1.0)
    assert meter.others() == 3.0
    assert C.threads_for(2, meter.others()) == 1


def test_the_real_meter_reads_this_machine():
    others = C.ContentionMeter(window=0.0).others()
    assert others >= 0.0
    assert 1 <= C.adaptive_threads() <= C.usable_cores()
