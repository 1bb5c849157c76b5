"""The gradients of Sinh, Cosh, Asin, Acos, Atan, Atan2, Xdivy, Angle, SegmentProd,
DynamicStitch and the Optional ops, and Cumprod's at x = 0 (DivNoNan, as TensorFlow), against
TensorFlow's (tests/fixtures/complex_grad, tools/gen_complex_grad_fixtures.py); Digamma's
is polygamma(1, x).
"""
import numpy as np
import pytest

from helpers import tfg_cli
from test_complex_grads import DIR, INDEX, check_case
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

CASES = [c for c in INDEX if c["group"] == "more"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_gradient_matches_tensorflow(case):
    check_case(case)


def test_fixture_covers_the_new_gradients():
    names = {c["name"].rsplit("_", 1)[0] for c in CASES} | {c["name"] for c in CASES}
    for op in ("Sinh", "Cosh", "Asin", "Acos", "Atan", "Atan2", "Xdivy", "Angle", "SegmentProd",
               "DynamicStitch", "Cumprod_zero", "Optional", "Optional_one_used"):
        assert op in names, op


def test_cumprod_gradient_at_zero_is_tensorflows(tmp_path):
    """The sweep's repro: TensorFlow's [1, 0, 0, 0] (div_no_nan), not [1, nan, 0, 0]."""
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **{"Cumprod_zero_sweep/x:0": np.array([1.0, 0.0, 2.0, 3.0], np.float32)})
    g = tfg_cli("grad", "--ys", "Cumprod_zero_sweep/loss", "--xs", "Cumprod_zero_sweep/x",
                DIR / "complex_grad.pb")
    out = tmp_path / "out.npz"
    tfg_cli("run", "-", "--feeds", feeds, "--fetch", "grad/Cumprod_zero_sweep/x:0", "-o", out,
            input=g.stdout)
    got = np.load(out)["grad/Cumprod_zero_sweep/x:0"]
    assert np.isfinite(got).all()
    expected = np.load(DIR / "complex_grad.npz")["Cumprod_zero_sweep/grad_x"]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_cli_grad_through_a_v2_cond_gradient_matches_tensorflow(tmp_path):
    """A TF2 function holding its own tape gradient (map_fn, scan with a cond, foldl) frozen
    with functional control flow: its cond gradient's OptionalFromValue / OptionalGetValue are
    on the path, and `tfg grad` of the loss equals TensorFlow's tape gradient."""
    g = tfg_cli("grad", "--ys", "Identity:0", "--xs", "x:0", DIR / "scan_map_cond.pb")
    out = tmp_path / "out.npz"
    tfg_cli("run", "-", "--feeds", DIR / "scan_map_cond_feeds.npz", "--fetch", "grad/x:0",
            "-o", out, input=g.stdout)
    expected = np.load(DIR / "scan_map_cond_expected.npz")["grad/x:0"]
    np.testing.assert_allclose(np.load(out)["grad/x:0"], expected, rtol=1e-4, atol=1e-5)


def _digamma_graph():
    """y = Sum(Digamma(x)), x a float32 Placeholder."""
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("d", "Digamma", ["x:0"], {"T": DType.FLOAT})
    g.add_node("axes", "Const", attrs={"dtype": DType.INT32, "value": np.array([0], np.int32)})
    g.add_node("y", "Sum", ["d:0", "axes:0"], {"T": DType.FLOAT})
    return g


def test_digamma_gradient_is_polygamma_1(tmp_path):
    """TensorFlow's g * polygamma(1, x) (tests/test_special_more_ops.py: against TensorFlow),
    through the API and the CLI."""
    x = np.float32([0.5, 1.0, 3.0])
    trigamma = [np.pi ** 2 / 2, np.pi ** 2 / 6, np.pi ** 2 / 6 - 1 - 1 / 4]
    g2 = grad(_digamma_graph(), ["y"], ["x"])
    assert any(n.op == "Polygamma" for n in g2.nodes)
    got = Session(g2).run(["grad/x:0"], {"x:0": x})[0]
    np.testing.assert_allclose(got, trigamma, rtol=1e-6)
    path = tmp_path / "g.pb"
    io.save(_digamma_graph(), str(path))
    p = tfg_cli("grad", "--ys", "y", "--xs", "x", path)
    assert "Polygamma" in {n.op for n in io.loads(p.stdout)}
