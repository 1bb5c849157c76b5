"""tfg.Runner (tfg/executor/runner.py): the loop of steps shared by `tfg run` and Python."""
import numpy as np
import pytest

import tfg
from tfg import builder as tb
from tfg.errors import TfgInputError, TfgRuntimeError


def counter_graph():
    """v += 1 per step (the AssignAdd `train` outputs the new value); `bad` fails when run."""
    with tb.Graph() as b:
        v = tb.Variable(np.zeros(2, np.float32), name="v")
        tb.assign_add(v, tb.ones([2]), name="train")
        x = tb.placeholder(tb.float32, [None], name="x")
        tb.reshape(x, [3], name="bad")  # fails for a feed of any size but 3
        tb.global_variables_initializer()
    return b.graph


def test_steps_run_in_order_with_progress_and_last_values():
    sess = tfg.Session(counter_graph())
    seen = []
    runner = tfg.Runner(sess, fetches=["train"], init="init", steps=4,
                        on_step=lambda done, total: seen.append((done, total)))
    (value,) = runner.run()
    np.testing.assert_array_equal(value, [4, 4])
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert (runner.start, runner.done) == (0, 4)


def test_a_single_fetch_name_gives_a_single_value():
    sess = tfg.Session(counter_graph())
    value = sess.runner(fetches="train", init=["init"], steps=2).run()
    np.testing.assert_array_equal(value, [2, 2])


def test_save_then_restore_continues_from_the_saved_values(tmp_path):
    sess = tfg.Session(counter_graph())
    sess.runner(targets=["train"], init=["init"], steps=3, save=str(tmp_path)).run()
    fresh = tfg.Session(counter_graph())
    (value,) = fresh.runner(fetches=["train"], init=["init"], restore=str(tmp_path),
                            steps=1).run()
    np.testing.assert_array_equal(value, [4, 4])  # restored 3 after init's 0, then one step


def test_checkpoints_resume_and_a_finished_run_only_fetches(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    tfg.Runner(tfg.Session(counter_graph()), targets="train", init="init", steps=5,
               checkpoint_dir=ckpt, checkpoint_every=2).run()
    notes = []
    runner = tfg.Runner(tfg.Session(counter_graph()), fetches=["train"], init="init", steps=5,
                        checkpoint_dir=ckpt, log=notes.append)
    (value,) = runner.run()
    # All 5 steps were done: no step runs; the fetch is computed once from the restored 5.
    assert runner.start == 5 and runner.done == 5
    np.testing.assert_array_equal(value, [6, 6])
    assert notes and "all 5 steps are done" in notes[0]


def test_a_failing_step_names_the_step_and_the_checkpoint_a_rerun_resumes_from(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    runner = tfg.Runner(tfg.Session(counter_graph()), fetches=["bad"], feeds={"x": [1.0, 2.0]},
                        init="init", steps=3, checkpoint_dir=ckpt)
    with pytest.raises(TfgRuntimeError, match=r"\[step 1 of 3 failed; no checkpoint in .* yet"):
        runner.run()
    assert runner.done == 0


def test_only_the_last_step_is_traced():
    sess = tfg.Session(counter_graph())
    traced = []
    runner = sess.runner(fetches=["train"], init="init", steps=3, trace=True,
                         on_step=lambda done, total: traced.append(sess.last_trace))
    runner.run()
    assert traced[:3] == [None, None, None] and traced[3] is not None
    assert any(e[0] == "train" for e in sess.last_trace.events)


@pytest.mark.parametrize("options", [{"steps": 0}, {"steps": 1.5},
                                     {"checkpoint_every": 2}])
def test_bad_options_are_input_errors(options):
    with pytest.raises(TfgInputError):
        tfg.Runner(tfg.Session(counter_graph()), targets="train", **options)
