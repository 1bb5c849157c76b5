"""Saved state is checked, never trusted (issue 21): checkpoints record the graph that made
them, forged ones are refused before decoding, writes never clobber or leak files.

Hostile files come from tools/gen_hostile.py; each refusal is one line, exit 2, within 10 s of CPU
and under 1 GB of RSS.
"""
import os
import subprocess
import sys

import pytest

from hostile_helpers import assert_refused, gen_hostile, run_bounded


@pytest.fixture
def counter(tmp_path):
    return gen_hostile.variable_graph(str(tmp_path))


def _train(graph, ckpt, steps, *extra):
    return run_bounded(["run", graph, "--init", "init", "--target", "train", "--fetch", "read",
                        "--steps", steps, "--checkpoint-dir", ckpt, *extra])


def test_resumed_run_says_from_which_step(counter, tmp_path):
    ckpt = tmp_path / "ckpt"
    first = _train(counter, ckpt, 3)
    assert first.rc == 0 and b"resuming" not in first.stderr
    again = _train(counter, ckpt, 5)
    assert again.rc == 0, again.stderr
    assert again.err_lines == [f"tfg: resuming from step 3 (checkpoint in {ckpt})"]
    # steps 4 and 5 only; the fetch is w's buffer after the step's AssignAdd, as in TensorFlow
    assert b"read = array([5., 5.]" in again.stdout


def test_checkpoint_of_another_graph_is_refused_describing_both(counter, tmp_path):
    ckpt = tmp_path / "shared"
    assert _train(counter, ckpt, 2).rc == 0
    other = gen_hostile.variable_graph(str(tmp_path), "other.pbtxt", var="v", size=3)
    says = ("was saved from another graph: it has variables 'w float32 [2]' where this graph "
            "has 'v float32 [3]'")
    # Sharing the --checkpoint-dir: the second graph neither resumes nor overwrites it.
    assert_refused(_train(other, ckpt, 4), says=says)
    assert_refused(run_bounded(["run", other, "--restore", ckpt, "--fetch", "read"]),
                   says=says)
    again = _train(counter, ckpt, 3)
    assert again.err_lines == [f"tfg: resuming from step 2 (checkpoint in {ckpt})"]


def test_same_shapes_other_names_is_another_graph(counter, tmp_path):
    ckpt = tmp_path / "c"
    assert _train(counter, ckpt, 1).rc == 0
    renamed = gen_hostile.variable_graph(str(tmp_path), "renamed.pbtxt", var="u", size=2)
    assert_refused(run_bounded(["run", renamed, "--restore", ckpt, "--fetch", "read"]),
                   says="'w float32 [2]' where this graph has 'u float32 [2]'")


def test_forged_checkpoint_with_huge_splats_is_refused_before_decoding(tmp_path):
    path = gen_hostile.ckpt_splats(str(tmp_path))
    outcome = run_bounded(["run", tmp_path / "counter.pbtxt", "--restore", path,
                           "--fetch", "read"])
    assert_refused(outcome, says="declares 1073741824 bytes from 18 stored")


def test_negative_step_is_refused(tmp_path):
    path = gen_hostile.ckpt_negative_step(str(tmp_path))
    outcome = _train(tmp_path / "counter.pbtxt", os.path.dirname(path), 3)
    assert_refused(outcome, says="checkpoint step -1000 is negative")


def test_save_refuses_to_overwrite_an_unrelated_file(counter, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    outcome = run_bounded(["run", counter, "--init", "init", "--target", "train",
                           "--save", notes])
    assert_refused(outcome, says="is not a tfg checkpoint; refusing to overwrite it")
    assert notes.read_text() == "my notes\n"
    # Its own checkpoint file is rewritten, as TensorFlow's Saver rewrites its own.
    own = tmp_path / "own.tfgckpt"
    for _ in range(2):
        ok = run_bounded(["run", counter, "--init", "init", "--target", "train", "--save", own])
        assert ok.rc == 0, ok.stderr


def test_stale_temp_files_of_killed_writers_are_removed(tmp_path):
    """kill -9 during a write leaves `.tmp-tfgckpt-<pid>-*`; the next write removes those
    whose process is gone and keeps those of a live writer."""
    from tfg.kernels.checkpoint_format import TMP_PREFIX, write_checkpoint

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{TMP_PREFIX}{dead.pid}-0a1b2c"
    live = tmp_path / f"{TMP_PREFIX}{os.getppid()}-0a1b2c"
    stale.write_bytes(b"half a checkpoint")
    live.write_bytes(b"being written")
    import numpy as np
    write_checkpoint(tmp_path / "variables.tfgckpt", {"w": np.zeros(2, np.float32)}, step=1)
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")) == \
        [live.name]


def test_kill_9_mid_write_leaves_no_temp_forever(tmp_path):
    """A writer killed while writing a large checkpoint: its temp file goes at the next save."""
    code = ("import numpy as np, sys\n"
            "from tfg.kernels.checkpoint_format import write_checkpoint\n"
            "print('ready', flush=True)\n"
            "for i in range(1000):\n"
            "    write_checkpoint(sys.argv[1], {'w': np.ones(1 << 23, np.float32)}, step=i)\n")
    target = tmp_path / "variables.tfgckpt"
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.stdout.readline() == b"ready\n"
    import time
    deadline = time.monotonic() + 10
    while not any(p.name.startswith(".tmp") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    proc.stdout.close()
    import numpy as np

    from tfg.kernels.checkpoint_format import read_checkpoint, write_checkpoint
    write_checkpoint(target, {"w": np.zeros(2, np.float32)}, step=1)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert read_checkpoint(target)["w"].shape == (2,)


def test_write_temp_leaves_the_process_umask_alone(tmp_path, monkeypatch):
    from tfg.graphdef import io

    def no_umask(*_):
        raise AssertionError("os.umask changes the mask of every thread")
    monkeypatch.setattr(os, "umask", no_umask)
    path = tmp_path / "g.bin"
    io.write_bytes_atomic(str(path), b"data")
    mask = int(next(ln.split()[1] for ln in open("/proc/self/status")
                    if ln.startswith("Umask:")), 8)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
