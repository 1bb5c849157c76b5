"""Every CPU kernel against TensorFlow: tests/fixtures/kernels holds one GraphDef of op nodes fed
by Const nodes (made by tools/gen_kernel_fixtures.py) and TensorFlow's outputs for each."""
import json

import numpy as np
import pytest

from tests.conftest import FIXTURES
from tfg.errors import UnknownOpError
from tfg.graphdef import io
from tfg.kernels import get_kernel
from tfg.kernels.context import KernelContext
from tfg.kernels.resources import Ref, StepContext

DIR = FIXTURES / "kernels"
CASES = json.loads((DIR / "cases.json").read_text())["cases"]
# TensorFlow leaves these outputs uninitialized on CPU (inference-mode reserve spaces).
UNDEFINED = {"fusedbatchnorm_infer": (3, 4), "fusedbatchnormv2_infer": (3, 4)}


@pytest.fixture(scope="module")
def graph():
    return io.load(str(DIR / "kernels.pb"))


@pytest.fixture(scope="module")
def expected():
    with np.load(DIR / "expected.npz") as f:
        return dict(f)


def make_ctx(node):
    """A KernelContext from the op signature, or from the node's own attrs when no signature
    is registered (TensorFlow writes every attr, defaults included, into the NodeDef)."""
    try:
        return KernelContext.for_node(node)
    except UnknownOpError:
        return KernelContext(node, {k: node.get_attr(k) for k in node.attr})


def run_node(graph, node, refs=None, step=None):
    values = []
    for i, ref in enumerate(node.data_inputs):
        src = graph[ref.node]
        if refs is not None and i in refs:
            values.append(refs[i])
            continue
        kd = get_kernel(src.op)
        out = kd.fn(make_ctx(src))
        values.append(out if not isinstance(out, (list, tuple)) else out[ref.port])
    kd = get_kernel(node.op)
    ctx = make_ctx(node)
    if kd.needs_step:
        out = kd.fn(ctx, step or StepContext(), *values)
    else:
        out = kd.fn(ctx, *values)
    return out


def as_list(out, n):
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out] if n else []


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_kernel_matches_tensorflow(case, graph, expected):
    node = graph[case["name"]]
    refs = {}
    for i, const in case.get("refs", {}).items():
        var = Ref(f"{case['name']}/var{i}")
        var.assign(np.array(graph[const].get_attr("value")))
        refs[int(i)] = var
    out = as_list(run_node(graph, node, refs), case["outputs"])
    assert len(out) == case["outputs"]
    for port, got in enumerate(out):
        if port in UNDEFINED.get(case["name"], ()):
            continue
        if isinstance(got, Ref):
            got = got.get()
        want = expected[f"{case['name']}:{port}"]
        _compare(np.asarray(got), want, case, f"output {port}")
    for i, key in case.get("refs_after", {}).items():
        _compare(np.asarray(refs[int(i)].get()), expected[key], case, f"ref input {i}")


def _compare(got, want, case, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != TensorFlow's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != TensorFlow's {want.dtype}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"],
                                   err_msg=what, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def test_every_fixture_op_has_a_kernel(graph):
    for node in graph:
        get_kernel(node.op)
