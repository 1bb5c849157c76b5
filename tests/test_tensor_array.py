"""TF1 TensorArray graphs made by TensorFlow (tests/fixtures/tensor_array, written by
tools/gen_tensor_array_fixtures.py): a `dynamic_rnn` LSTM, a `bidirectional_dynamic_rnn` GRU
with sequence lengths, a beam search with a backtracking loop, arrays through nested loops
(one made per outer iteration), and ReverseSequence / TopKV2 / Erfc alone. Each runs with
TensorFlow's values, runs TensorFlow's own gradient graph (TensorArrayGradV3 as TensorFlow
builds it), and `tfg grad` gives TensorFlow's tf.gradients, also after `tfg optimize`, on 3
CPU devices and on a 2-worker cluster.

Kernel-level tests of the TensorArray semantics and TensorFlow's error words are in
test_tensor_array_kernels.py.
"""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.grad import grad
from tfg.passes.manager import optimize
from tfg.passes.place import place

DIR = FIXTURES / "tensor_array"
INDEX = json.loads((DIR / "cases.json").read_text())
CASES = sorted(INDEX)
RTOL, ATOL = 1e-5, 1e-5


def _arrays(name):
    return dict(np.load(DIR / f"{name}.npz"))


def _feeds(name):
    return {k[len("feed/"):]: v for k, v in _arrays(name).items() if k.startswith("feed/")}


def _grad_names(xs):
    return [f"grad/{x.split(':')[0]}" for x in xs]


def _close(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, what
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def _check(case, names, got, prefix):
    arrays = _arrays(case)
    for name, value in zip(names, got):
        _close(value, arrays[f"{prefix}/{name}"], f"{case}: {prefix}/{name}")


def _with_grads(case):
    entry = INDEX[case]
    return grad(io.load(str(DIR / f"{case}.pb")), entry["ys"], entry["xs"])


def test_the_cases_carry_tensor_arrays_in_v1_loops():
    ops = {c: {n.op for n in io.load(str(DIR / f"{c}.pb"))} for c in CASES}
    for case in ("lstm", "bigru", "beam", "nested"):
        assert {"TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3",
                "TensorArrayGatherV3", "Enter", "NextIteration", "Exit"} <= ops[case]
    assert "TensorArrayScatterV3" in ops["lstm"] and "ReverseSequence" in ops["bigru"]
    assert "TopKV2" in ops["beam"]
    tf_grad_ops = {n.op for n in io.load(str(DIR / "lstm_tfgrad.pb"))}
    assert "TensorArrayGradV3" in tf_grad_ops


@pytest.mark.parametrize("case", CASES)
def test_run_equals_tensorflow(case):
    fetches = INDEX[case]["fetches"]
    got = Session(io.load(str(DIR / f"{case}.pb"))).run(fetches, _feeds(case))
    _check(case, fetches, got, "out")


@pytest.mark.parametrize("case", CASES)
def test_tensorflow_gradient_graph_runs(case):
    """TensorFlow's own backward graph: TensorArrayGradV3 arrays keyed by source, created in
    and outside the backward loops, writes aggregated, reads cleared."""
    entry = INDEX[case]
    got = Session(io.load(str(DIR / f"{case}_tfgrad.pb"))).run(entry["tf_grads"], _feeds(case))
    _check(case, entry["xs"], got, "grad")


@pytest.mark.parametrize("case", CASES)
def test_grad_equals_tensorflow(case):
    entry = INDEX[case]
    g = _with_grads(case)
    got = Session(g).run(_grad_names(entry["xs"]) + entry["fetches"], _feeds(case))
    _check(case, entry["xs"], got[:len(entry["xs"])], "grad")
    _check(case, entry["fetches"], got[len(entry["xs"]):], "out")
    if case in ("lstm", "bigru", "nested"):  # the loss reads the arrays (beam's: the scores only)
        assert any(n.op == "TensorArrayGradV3" for n in g)


@pytest.mark.parametrize("case", CASES)
def test_grad_then_optimize_then_run(case):
    entry = INDEX[case]
    fetches = _grad_names(entry["xs"]) + entry["fetches"]
    g = optimize(_with_grads(case), keep=fetches)
    got = Session(g).run(fetches, _feeds(case))
    _check(case, entry["xs"], got[:len(entry["xs"])], "grad")
    _check(case, entry["fetches"], got[len(entry["xs"]):], "out")


@pytest.mark.parametrize("case", CASES)
def test_pipeline_on_three_devices(case):
    """The placer keeps each array with the ops that use its handle (resource colocation)
    while the loops spread over the devices."""
    entry = INDEX[case]
    g = _with_grads(case)
    placed = place(g, devices="cpu:3")
    arrays = [n for n in placed if n.op.startswith("TensorArray")]
    for n in arrays:
        if n.op in ("TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayGatherV3"):
            handle = placed[n.inputs[0].split(":")[0]]
            assert handle.device == n.device, n.name
    fetches = _grad_names(entry["xs"]) + entry["fetches"]
    got = Session(g, devices="cpu:3").run(fetches, _feeds(case))
    _check(case, entry["xs"], got[:len(entry["xs"])], "grad")
    _check(case, entry["fetches"], got[len(entry["xs"]):], "out")


def test_cli_grad_optimize_pipeline(tmp_path):
    """`tfg grad | tfg optimize | tfg run --devices cpu:3` on the dynamic_rnn LSTM."""
    entry = INDEX["lstm"]
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **_feeds("lstm"))
    names = _grad_names(entry["xs"])
    g = tfg_cli("grad", DIR / "lstm.pb", "--ys", "loss", "--xs", ",".join(entry["xs"])).stdout
    g = tfg_cli("optimize", "--keep", ",".join(names + ["loss"]), input=g).stdout
    out = tmp_path / "out.npz"
    tfg_cli("run", "-", "--devices", "cpu:3", "--feeds", feeds, "-o", out,
            *sum((["--fetch", n] for n in names + ["loss"]), []), input=g)
    with np.load(out) as got:
        for x, n in zip(entry["xs"], names):
            _close(got[n], _arrays("lstm")[f"grad/{x}"], n)
        _close(got["loss"], _arrays("lstm")["out/loss:0"], "loss")


def test_cluster_of_two_workers():
    """`tfg grad` of the LSTM on two `tfg worker` processes: the arrays stay with their loop
    on one task, the step crosses tasks, values are TensorFlow's."""
    from tfg.executor.distributed.local import LocalCluster

    entry = INDEX["lstm"]
    g = _with_grads("lstm")
    fetches = _grad_names(entry["xs"]) + ["loss"]
    with LocalCluster(2) as cluster:
        placed = place(g, cluster=cluster.spec)
        tasks = {n.device.split("/device:")[0] for n in placed}
        assert len(tasks) == 2, tasks
        with Session(g, cluster=cluster.spec) as sess:
            got = sess.run(fetches, _feeds("lstm"))
    _check("lstm", entry["xs"], got[:len(entry["xs"])], "grad")
    _close(got[-1], _arrays("lstm")["out/loss:0"], "loss")
