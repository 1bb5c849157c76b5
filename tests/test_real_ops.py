"""The ops of real models' graphs (docs/ops.md, tools/op_census.py) against TensorFlow:
kernels and gradients from tests/fixtures/real_ops (tools/gen_real_ops_fixtures.py), through
the same mechanisms as tests/fixtures/kernels and tests/fixtures/grad."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from test_grad_fixtures import check_gradient_case
from test_kernels_fixtures import _compare, as_list, run_node
from tfg.graphdef import io

DIR = FIXTURES / "real_ops"
KERNELS = json.loads((DIR / "cases.json").read_text())["cases"]
GRADS = [(group, case) for group, cases in
         json.loads((DIR / "grad_cases.json").read_text()).items() for case in cases]


@pytest.fixture(scope="module")
def kernel_graph():
    return io.load(str(DIR / "kernels.pb")), dict(np.load(DIR / "expected.npz"))


@pytest.mark.parametrize("case", KERNELS, ids=[c["name"] for c in KERNELS])
def test_kernel_matches_tensorflow(case, kernel_graph):
    graph, expected = kernel_graph
    out = as_list(run_node(graph, graph[case["name"]]), case["outputs"])
    assert len(out) == case["outputs"]
    for port, got in enumerate(out):
        _compare(np.asarray(got), expected[f"{case['name']}:{port}"], case, f"output {port}")


_GRAPHS = {}


@pytest.mark.parametrize("group,case", GRADS, ids=[c["name"] for _, c in GRADS])
def test_gradient_matches_tensorflow(group, case):
    if group not in _GRAPHS:
        _GRAPHS[group] = io.load(str(DIR / f"{group}.pb")), dict(np.load(DIR / f"{group}.npz"))
    graph, arrays = _GRAPHS[group]
    check_gradient_case(graph, arrays, case)


def test_variable_shape_of_a_resource_variable():
    """VariableShape (in TensorFlow's gradients of Keras RNNs): the value's shape, in out_type."""
    from test_kernels_state import run
    from tfg.kernels.resources import StepContext
    from tfg.schemas.dtypes import DType

    h = run("VarHandleOp", step=StepContext(), name="v", dtype=DType.FLOAT, shape=(3, 4))
    run("AssignVariableOp", h, np.zeros((3, 4), np.float32), dtype=DType.FLOAT)
    got = run("VariableShape", h, out_type=DType.INT64)
    assert got.dtype == np.int64 and got.tolist() == [3, 4]
