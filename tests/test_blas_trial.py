"""The adaptive setting's trial (tfg/executor/blas_trial.py): where the meter allows two BLAS
threads, a prepared step times itself on two and on one and keeps the faster; where it
gives one thread on a machine of two cores, two are timed against it."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import blas_floor, blas_trial
from tfg.executor.blas import ADAPTIVE
from tfg.executor.blas_trial import (BUSY_MARGIN, CLEAR, MARGIN, MAX_REPROBE, REPROBE, TRIAL,
                                     WARM_STEPS, ThreadTrial)

W = WARM_STEPS  # steps a signature runs untimed before its trial
from tfg.kernels import onednn

FEEDS = [np.zeros((2, 3), np.float32)]


@pytest.fixture
def two_free_cores(monkeypatch):
    monkeypatch.setattr(blas_floor, "usable_cores", lambda: 2)
    others = [0.0]
    monkeypatch.setattr(blas_floor.meter(), "others", lambda: others[0])
    monkeypatch.delenv(blas_trial.ENV_VAR, raising=False)
    return others


def drive(trial, seconds_of, steps, meter=2):
    """Run `steps` steps whose wall time is seconds_of(count); -> the counts used (ADAPTIVE
    runs on `meter`, the meter's count)."""
    used = []
    for _ in range(steps):
        limit, ticket = trial.limit(ADAPTIVE, FEEDS)
        count = meter if limit == ADAPTIVE else limit
        used.append(count)
        trial.record(ticket, seconds_of(count))
    return used


def test_one_thread_taken_where_it_is_faster_by_the_margin(two_free_cores):
    used = drive(ThreadTrial(), {1: 0.030, 2: 0.036}.get, W + 2 * TRIAL + 20)
    assert used[:W] == [2] * W  # the first steps fill caches, on the meter's count, untimed
    assert sorted(used[W:W + 2 * TRIAL]) == [1] * TRIAL + [2] * TRIAL  # alternating
    assert used[W + 2 * TRIAL:] == [1] * 20


def test_two_threads_kept_where_they_win_or_one_does_not_win_by_the_margin(two_free_cores):
    used = drive(ThreadTrial(), {1: 0.030, 2: 0.015}.get, W + 2 * TRIAL + 20)
    assert used[W + 2 * TRIAL:] == [2] * 20
    # one thread faster by less than the margin: within noise, the meter's count stays
    near = {1: 0.030 * (1 - MARGIN / 2), 2: 0.030}.get
    assert drive(ThreadTrial(), near, W + 2 * TRIAL + 5)[-5:] == [2] * 5


def test_one_thread_clearly_slower_is_timed_twice(two_free_cores):
    times = {2: 0.020, 1: 0.020 * (1 + CLEAR) * 1.1}
    used = drive(ThreadTrial(), times.get, W + 4 + 20)
    assert sorted(used[W:W + 4]) == [1, 1, 2, 2]  # two timed steps of each
    assert used[W + 4:] == [2] * 20
    # one slow one-thread step among fast ones (noise) does not decide
    ones = iter([0.020 * (1 + CLEAR) * 1.5] + [0.016] * 50)
    used = drive(ThreadTrial(), lambda c: next(ones) if c == 1 else 0.020,
                 W + 2 * TRIAL + 10)
    assert used[-10:] == [1] * 10
    # a gap under CLEAR: the full trial
    near = {2: 0.020, 1: 0.020 * (1 + CLEAR) * 0.9}.get
    used = drive(ThreadTrial(), near, W + 2 * TRIAL + 5)
    assert sorted(used[W:W + 2 * TRIAL]) == [1] * TRIAL + [2] * TRIAL


def test_a_slow_first_step_on_n_threads_does_not_switch_to_one(two_free_cores):
    """The Session's second step (the trial's first timed one) may load compiled loops: one
    slow step on n threads is not enough, the full trial's minimums decide."""
    steps = iter([0.020] * W + [1.5] + [0.020] * 50)  # untimed, then a slow timed step on 2
    trial = ThreadTrial()
    used = drive(trial, lambda count: next(steps) if count == 2 else 0.030, W + 2 * TRIAL + 10)
    assert used[-10:] == [2] * 10


def test_a_step_that_made_onednn_kernels_is_not_timed(two_free_cores, monkeypatch):
    """A Session's first one-thread step makes oneDNN's kernels for that team size: however
    slow, it decides nothing (here 20x the two-thread step; then one thread is faster)."""
    made = [0]
    monkeypatch.setattr(onednn, "kernels_made", lambda: made[0])
    first = [True]

    def seconds(count):
        if count == 1 and first[0]:
            first[0] = False
            made[0] += 356
            return 0.400
        return 0.016 if count == 1 else 0.020
    used = drive(ThreadTrial(), seconds, W + 1 + 2 * TRIAL + 10)
    assert used[-10:] == [1] * 10


def test_the_other_count_is_tried_again_and_a_change_followed(two_free_cores):
    times = {1: 0.030, 2: 0.036}
    trial = ThreadTrial()
    drive(trial, times.get, W + 2 * TRIAL)
    times[2] = 0.010  # the host changed: two threads now win
    used = drive(trial, times.get, REPROBE + 2 * TRIAL + 10)
    assert used[:REPROBE] == [1] * REPROBE
    assert used[-10:] == [2] * 10


def test_no_trial_for_fixed_counts_one_core_or_when_turned_off(two_free_cores,
                                                               monkeypatch):
    trial = ThreadTrial()
    assert trial.limit(2, FEEDS) == (2, None)
    assert trial.limit(None, FEEDS) == (None, None)
    monkeypatch.setattr(blas_floor, "usable_cores", lambda: 1)
    assert [trial.limit(ADAPTIVE, FEEDS) for _ in range(W + 5)] == [(ADAPTIVE, None)] * (W + 5)
    monkeypatch.setattr(blas_floor, "usable_cores", lambda: 2)
    monkeypatch.setenv(blas_trial.ENV_VAR, "0")
    assert [trial.limit(ADAPTIVE, FEEDS)[0] for _ in range(5)] == [ADAPTIVE] * 5


def drive_busy(trial, seconds_of, steps):
    """drive() where the meter gives one thread."""
    return drive(trial, seconds_of, steps, meter=1)


def test_a_busy_machine_takes_two_threads_where_they_win_by_the_margin(two_free_cores):
    """Another process busy on a core: the meter gives one thread, and the trial times two
    against it (the cnn row under `--load 2`: 21.9 ms on two, 31-33 on one)."""
    two_free_cores[0] = 1.0
    used = drive_busy(ThreadTrial(), {1: 0.031, 2: 0.022}.get, W + 2 * TRIAL + 20)
    assert used[:W] == [1] * W  # the meter's count, untimed
    assert sorted(used[W:W + 2 * TRIAL]) == [1] * TRIAL + [2] * TRIAL
    assert used[W + 2 * TRIAL:] == [2] * 20
    # two threads faster by less than the busy machine's margin: the meter's one stays
    near = {1: 0.030, 2: 0.030 * (1 - BUSY_MARGIN * 0.9)}.get
    assert drive_busy(ThreadTrial(), near, W + 2 * TRIAL + 5)[-5:] == [1] * 5
    # a slow first step on two threads (their first use on this load) does not end the
    # trial: its medians decide (a cnn run under `--load 2` kept one thread so before)
    twos = iter([0.060] + [0.022] * 50)
    used = drive_busy(ThreadTrial(), lambda c: next(twos) if c == 2 else 0.031,
                      W + 2 * TRIAL + 10)
    assert used[-10:] == [2] * 10


def test_a_busy_machine_probes_two_slow_threads_ever_less_often(two_free_cores):
    """Two threads much slower on a busy machine (MobileNetV3Small under `--load 2`: 1.74x):
    two probe steps, then one thread; each probe that keeps it doubles the wait."""
    two_free_cores[0] = 2.0
    trial = ThreadTrial()
    used = drive_busy(trial, {1: 0.010, 2: 0.010 * (1 + CLEAR) * 1.5}.get, 2000)
    # the first trial is a full one (a first slow step on two threads may be a one-time
    # cost); later probes stop after two clearly slower steps
    assert sorted(used[W:W + 2 * TRIAL]) == [1] * TRIAL + [2] * TRIAL
    probes = [i for i, c in enumerate(used) if c == 2][TRIAL:]
    assert len(probes) % 2 == 0 and probes[0] - (W + 2 * TRIAL) == 2 * REPROBE
    gaps = [b - a for a, b in zip(probes[1::2], probes[2::2])]
    assert gaps[:2] == [4 * REPROBE + 1, 8 * REPROBE + 1]
    assert TRIAL + len(probes) <= 12  # at most 12 of 2000 steps on two threads
    assert (sig := next(iter(trial.signatures.values()))).reprobe <= MAX_REPROBE
    assert sig.choice == 1


def test_a_session_step_runs_the_trial_and_gives_the_same_values(two_free_cores):
    from tfg.executor.session import Session
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [256, 256], name="x")  # over the GEMM floor
        tb.matmul(x, x, name="y")
    x = np.random.RandomState(0).rand(256, 256).astype(np.float32)
    sess = Session(b.graph)
    outs = [sess.run("y", feeds={"x": x}) for _ in range(W + 2 * TRIAL + 2)]
    for out in outs:
        np.testing.assert_allclose(out, x @ x, rtol=1e-5)
    (prepared,) = sess._cache.values()
    (sig,) = prepared.thread_trial.signatures.values()
    assert sig.choice in (1, 2)
