"""tfg.grad against TensorFlow's own gradients (tests/fixtures/grad, made by
tools/gen_grad_fixtures.py): nested while loops, cond in while, while in cond, nested conds,
an RNN over 5 steps, loop invariants, a conv net, and every differentiable op family."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.grad import grad

DIR = FIXTURES / "grad"
INDEX = json.loads((DIR / "cases.json").read_text())
CASES = [(group, case) for group, cases in INDEX.items() for case in cases]
_GRAPHS, _ARRAYS = {}, {}


def _load(group):
    if group not in _GRAPHS:
        _GRAPHS[group] = io.load(str(DIR / f"{group}.pb"))
        _ARRAYS[group] = dict(np.load(DIR / f"{group}.npz"))
    return _GRAPHS[group], _ARRAYS[group]


def grad_name(x):
    node, _, port = x.partition(":")
    return f"grad/{node}:0" if port in ("", "0") else f"grad/{node}_{port}:0"


@pytest.mark.parametrize("group,case", CASES, ids=[c["name"] for _, c in CASES])
def test_gradient_matches_tensorflow(group, case):
    graph, arrays = _load(group)
    check_gradient_case(graph, arrays, case)


def check_gradient_case(graph, arrays, case):
    """`tfg grad` of case's ys w.r.t. its xs, run on the group's feeds (and the case's
    overrides), against TensorFlow's gradients stored beside them (tools/gen_grad_fixtures.py's
    layout, shared by tools/gen_real_ops_fixtures.py)."""
    feeds = {k[len("feed/"):]: v for k, v in arrays.items() if k.startswith("feed/")}
    for k in case["overrides"]:
        feeds[k] = arrays[f"{case['name']}/feed/{k}"]
    g2 = grad(graph, case["ys"], case["xs"])
    got = Session(g2).run([grad_name(x) for x in case["xs"]], feeds)
    for x, value in zip(case["xs"], got):
        expected = arrays[f"{case['name']}/{x}"]
        assert value.shape == expected.shape, x
        np.testing.assert_allclose(value, expected, rtol=case["rtol"], atol=case["atol"],
                                   err_msg=f"{case['name']}: d/d{x}")


@pytest.mark.parametrize("group,case", [(g, c) for g, c in CASES if g == "control_flow"],
                         ids=[c["name"] for g, c in CASES if g == "control_flow"])
def test_gradient_survives_optimize(group, case):
    """grad | optimize | run: the backward loops and stacks keep their meaning."""
    from tfg.passes.manager import optimize

    graph, arrays = _load(group)
    feeds = {k[len("feed/"):]: v for k, v in arrays.items() if k.startswith("feed/")}
    for k in case["overrides"]:
        feeds[k] = arrays[f"{case['name']}/feed/{k}"]
    fetches = [grad_name(x) for x in case["xs"]]
    g3 = optimize(grad(graph, case["ys"], case["xs"]), keep=[f[:-2] for f in fetches])
    for x, value in zip(case["xs"], Session(g3).run(fetches, feeds)):
        np.testing.assert_allclose(value, arrays[f"{case['name']}/{x}"], rtol=case["rtol"],
                                   atol=case["atol"], err_msg=f"{case['name']}: d/d{x}")
