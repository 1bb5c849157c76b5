"""`tfg grad --optimizer`: training graphs against TensorFlow's own v1 optimizers.

Fixture: tests/fixtures/train (tools/gen_train_fixtures.py, needs TensorFlow): the forward MLP
and TF's losses over 100 steps of GradientDescent, Momentum, Adam and RMSProp from the same
initial values.
"""
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import tfg
from tfg.cli import cli as cli_main
from tfg.errors import TfgInputError
from helpers import tfg_cli
from tfg.graphdef import io
from tfg.graphdef.attrs import Shape
from tfg.passes.grad import grad
from tfg.passes.grad.training import parse_optimizer

FIX = Path(__file__).parent / "fixtures" / "train"
XS = ["w1/read", "b1/read", "w2/read", "b2/read"]
CASES = json.loads((FIX / "cases.json").read_text())


def _train(g, steps=100):
    sess = tfg.Session(g)
    sess.run(targets=["init"])
    losses = []
    for _ in range(steps):
        losses.append(float(sess.run("loss")))
        sess.run(targets=["train"])
    losses.append(float(sess.run("loss")))
    return np.array(losses)


@pytest.mark.parametrize("name", sorted(CASES))
def test_losses_match_tensorflow(name):
    g = grad(io.load(FIX / "mlp.pb"), ["loss"], XS, optimizer=CASES[name])
    tfg.validate(g)  # what `tfg run` checks first: slot variables' attrs are well-typed
    want = np.load(FIX / "mlp.npz")[f"loss/{name}"]
    got = _train(g)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-4)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
    assert got[-1] < got[0]


def test_structure_sgd_and_existing_init():
    g = grad(io.load(FIX / "mlp.pb"), ["loss"], XS, optimizer="momentum:0.1,0.9")
    train = g["train"]
    assert train.op == "NoOp"
    applies = [g[i[1:]] for i in train.inputs]
    assert sorted(a.op for a in applies) == ["ApplyMomentum"] * 4
    assert sorted(a.inputs[0] for a in applies) == ["b1", "b2", "w1", "w2"]
    assert g["w1/Momentum"].op == "VariableV2"
    assert "^w1/Momentum/Assign" in g["init"].inputs
    assert [n for n in g if n.name.startswith("init")] == [g["init"]]


def test_new_init_groups_all_initializers():
    g = io.load(FIX / "mlp.pb")
    g.remove_node("init")
    g = grad(g, ["loss"], XS, optimizer="adam:0.01")
    deps = set(g["init"].inputs)
    assert {"^w1/Assign", "^b2/Assign", "^w1/Adam/Assign", "^beta1_power/Assign"} <= deps
    want = np.load(FIX / "mlp.npz")["loss/adam"]
    np.testing.assert_allclose(_train(g, 10)[-1], want[10], rtol=1e-4)


def test_non_variable_xs_are_skipped_and_all_non_variables_fail():
    g = grad(io.load(FIX / "mlp.pb"), ["loss"], ["w1/read", "x"], optimizer="sgd:0.1")
    assert [g[i[1:]].inputs[0] for i in g["train"].inputs] == ["w1"]
    with pytest.raises(TfgInputError, match="none of the xs"):
        grad(io.load(FIX / "mlp.pb"), ["loss"], ["x"], optimizer="sgd:0.1")


@pytest.mark.parametrize("spec", ["sgd", "sgd:x", "foo:1", "momentum:0.1", "adam:1,2,3,4,5"])
def test_bad_specs(spec):
    with pytest.raises(TfgInputError):
        parse_optimizer(spec)


def test_parse():
    assert parse_optimizer("momentum:0.1,0.9,nesterov") == (
        "momentum", 0.1, {"momentum": 0.9, "nesterov": True})
    assert parse_optimizer("adam:0.001")[2] == {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}


def test_resource_variables_train():
    """A linear model on a resource variable: ResourceApplyGradientDescent, loss falls."""
    from tfg.graphdef.graph import Graph
    from tfg.schemas.dtypes import DType

    g = Graph()
    f = DType.FLOAT
    g.add_node("x", "Const", [], {"dtype": f, "value": np.array([[1.0, 2.0], [3.0, 1.0]],
                                                               np.float32)})
    g.add_node("w", "VarHandleOp", [], {"dtype": f, "shape": Shape((2, 1)), "shared_name": "w"})
    g.add_node("w0", "Const", [], {"dtype": f, "value": np.zeros((2, 1), np.float32)})
    g.add_node("w/Assign", "AssignVariableOp", ["w", "w0"], {"dtype": f})
    g.add_node("w/read", "ReadVariableOp", ["w"], {"dtype": f})
    g.add_node("y", "MatMul", ["x", "w/read"], {"T": f})
    g.add_node("sq", "Square", ["y"], {"T": f})
    g.add_node("t", "Const", [], {"dtype": f, "value": np.array([[1.0], [2.0]], np.float32)})
    g.add_node("d", "Sub", ["y", "t"], {"T": f})
    g.add_node("d2", "Square", ["d"], {"T": f})
    g.add_node("axes", "Const", [], {"dtype": DType.INT32, "value": np.array([0, 1], np.int32)})
    g.add_node("loss", "Mean", ["d2", "axes"], {"T": f})
    g2 = grad(g, ["loss"], ["w/read"], optimizer="momentum:0.05,0.5")
    assert g2["train"].inputs and g2[g2["train"].inputs[0][1:]].op == "ResourceApplyMomentum"
    losses = _train(g2, 50)
    assert losses[-1] < 1e-3 * losses[0]


def test_cli_train_from_shell(tmp_path):
    out = tmp_path / "train.pb"
    r = CliRunner().invoke(cli_main, ["grad", str(FIX / "mlp.pb"), "--ys", "loss", "--xs",
                                      ",".join(XS), "--optimizer", "sgd:0.5", "-o", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli_main, ["run", str(out), "--init", "init", "--target", "train",
                                      "--steps", "100", "--fetch", "loss"])
    assert r.exit_code == 0, r.output
    assert "loss" in r.output
    p = tfg_cli("grad", FIX / "mlp.pb", "--ys", "loss", "--xs", "w1/read", "--optimizer",
                "bogus:1", check=False)
    assert p.returncode == 2 and b"unknown optimizer" in p.stderr
