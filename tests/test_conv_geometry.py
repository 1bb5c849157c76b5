"""Impossible or degenerate convolution and pooling geometry against TensorFlow 2.21's own CPU
kernels (tests/fixtures/conv_geometry, made by tools/gen_conv_geometry_fixtures.py): a VALID
window (with dilations, or explicit paddings) larger than its input, zero-size batches,
channels and filters, strides and dilations below 1, mismatched channels, negative explicit
paddings. Where TensorFlow refuses, tfg refuses naming the node and the problem in
TensorFlow's words; where TensorFlow returns a (maybe empty) result, tfg returns the same.
The shape functions (which the memory guard runs before every kernel) agree and never crash,
and the CLI refuses in one stderr line."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.infer import infer
from tfg.graphdef.io import load
from tfg.kernels.conv3d_geom import output_size

DIR = FIXTURES / "conv_geometry"
CASES = json.loads((DIR / "cases.json").read_text())
EXPECTED = np.load(DIR / "expected.npz")
# Errors TensorFlow's shape functions raise from shapes and attrs alone: tfg's must too
# wherever the shapes they need are known (not the backprops' sizes or MaxPoolV2's inputs).
SHAPE_PHRASES = ("Computed output size would be negative", "must be > 0", "must be >= 1",
                 "must be nonnegative")


def _feeds(case):
    return dict(np.load(DIR / f"{case}.npz"))


def _run(case, **session):
    return Session(load(DIR / f"{case}.pb"), **session).run([CASES[case]["fetch"]],
                                                            _feeds(case))[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_tensorflow(case):
    want = CASES[case]
    if "error" in want:
        with pytest.raises(TfgError) as info:
            _run(case)
        msg = str(info.value)
        assert want["error"].lower() in msg.lower(), f"TensorFlow: {want['tf_message']}"
        assert "'y'" in msg and want["op"] in msg
        assert "\n" not in msg
        return
    got, ref = np.asarray(_run(case)), EXPECTED[case]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_functions_agree_and_never_crash(case):
    """With the feeds' shapes known: TensorFlow's output shape, or a shape error (tfg's own
    kind, never numpy's or Python's) only where TensorFlow refuses too."""
    want = CASES[case]
    shapes = {name: value.shape for name, value in _feeds(case).items()}
    try:
        got = infer(load(DIR / f"{case}.pb"), strict=True, shapes=shapes)[("y", 0)].shape
    except TfgError as e:
        assert "error" in want, f"TensorFlow returns {want['ok']}, tfg's shape function: {e}"
        if want["error"] in SHAPE_PHRASES:
            assert want["error"] in str(e)
        return
    if "ok" in want:
        assert got is not None and len(got) == len(want["ok"])
        assert all(g is None or g == w for g, w in zip(got, want["ok"])), got
    elif want["error"] in SHAPE_PHRASES and want["op"] in ("Conv2D", "DepthwiseConv2dNative",
                                                            "Conv3D", "MaxPool", "AvgPool",
                                                            "MaxPool3D", "AvgPool3D"):
        pytest.fail(f"shape function accepted what TensorFlow's refuses: {got}")


@pytest.mark.parametrize("case", ["conv2d_filter_too_big", "maxpool_stride0",
                                  "conv2d_bpi_stride0", "maxpool_v2_ksize_too_big"])
def test_the_memory_guard_leaves_the_refusal_to_the_kernel(case):
    """The guard sizes outputs from the shape function first: its failure is not the error."""
    with pytest.raises(TfgError, match=CASES[case]["error"]):
        _run(case, max_memory="1M")


def test_output_size_follows_tensorflows_truncating_division():
    """(in - eff + stride) / stride in C++ truncates toward zero: with stride 2 a window up
    to three larger than the input gives an empty output (floor division would refuse the
    third), four larger an error."""
    assert output_size(3, 4, 1, 1, "VALID") == (0, 0, 0)
    assert output_size(3, 6, 2, 1, "VALID") == (0, 0, 0)
    with pytest.raises(TfgError, match=r"would be negative: -1 \[input_size: 3, "
                                       r"effective_filter_size: 7, stride: 2\]"):
        output_size(3, 4, 2, 2, "VALID")
    assert output_size(3, 6, 1, 1, "EXPLICIT", (1, 1)) == (0, 1, 1)
    with pytest.raises(TfgError, match="Stride must be > 0, but got -2"):
        output_size(3, 1, -2, 1, "SAME")


# --- the CLI ------------------------------------------------------------------------------------
def test_cli_refuses_a_window_larger_than_its_input_in_one_line(tmp_path):
    case = "conv2d_filter_too_big"
    feeds = tmp_path / "f.npz"
    np.savez(feeds, **{k[:-2]: v for k, v in _feeds(case).items()})
    out = tmp_path / "out.npz"
    p = tfg_cli("run", DIR / f"{case}.pb", "--feeds", feeds, "--fetch", "y", "-o", out,
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    # The fed shape against the filter's, before any kernel: an input error (exit 2; a refusal
    # static shapes cannot foresee is a failure while running, exit 1: docs/run.md), one line.
    assert p.returncode == 2 and len(lines) == 1, p.stderr.decode()
    assert "'y'" in lines[0] and "Conv2D" in lines[0]
    assert "Computed output size would be negative: -1 [input_size: 3" in lines[0]
    assert not out.exists()


def test_cli_returns_tensorflows_empty_output(tmp_path):
    case = "conv2d_zero_out_channels"
    feeds = tmp_path / "f.npz"
    np.savez(feeds, **{k[:-2]: v for k, v in _feeds(case).items()})
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / f"{case}.pb", "--feeds", feeds, "--fetch", "y", "-o", out)
    assert np.load(out)["y"].shape == EXPECTED[case].shape == (1, 3, 3, 0)
