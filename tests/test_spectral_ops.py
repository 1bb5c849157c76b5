"""The FFT and complex-number kernels and gradients against TensorFlow
(tests/fixtures/spectral_ops/spectral.npz, made by tools/gen_spectral_fixtures.py); the
gradient of a cropping RFFT (which TensorFlow's own gradient cannot take) by finite
differences; and the errors for an input shorter than fft_length."""
import numpy as np
import pytest

from conftest import FIXTURES
from helpers import numeric_gradient
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

FIX = np.load(FIXTURES / "spectral_ops" / "spectral.npz")
FORWARD = sorted({k.split("/")[0] for k in FIX.files if k.split("/")[0][0].isupper()})
F32, C64, I32 = DType.FLOAT, DType.COMPLEX64, DType.INT32


class G:
    """A tiny graph writer: each call adds one node and returns its output 0."""

    def __init__(self):
        self.g, self.n = Graph(), 0

    def const(self, v):
        v = np.asarray(v)
        return self.node("Const", [], {"dtype": DType.from_numpy(v.dtype), "value": v})

    def node(self, op, inputs, attrs, name=None):
        self.n += 1
        name = name or f"n{self.n}"
        self.g.add_node(name, op, inputs, attrs)
        return f"{name}:0"

    def ph(self, name, v):
        return self.node("Placeholder", [], {"dtype": DType.from_numpy(v.dtype)}, name=name)

    def rfft(self, x, n):
        return self.node("RFFT", [x, self.const(np.int32([n]))], {})

    def cplx(self, a, b):
        return self.node("Complex", [a, b], {"T": F32, "Tout": C64})

    def part(self, op, z):
        return self.node(op, [z], {"T": C64, "Tout": F32})

    def mul(self, a, b, t=F32):
        return self.node("Mul", [a, b], {"T": t})

    def add(self, a, b):
        return self.node("AddV2", [a, b], {"T": F32})


def _chain(name, b, a, bb):
    """The tfg twin of tools/gen_spectral_fixtures.py's GRADS[name]."""
    if name == "rfft_abs":
        return b.part("ComplexAbs", b.rfft(a, 8))
    if name == "rfft_parts":
        z = b.rfft(a, 7)
        return b.add(b.mul(b.part("Real", z), b.const(np.float32(1.5))), b.part("Imag", z))
    if name == "rfft_pad_odd":  # tf.signal.rfft pads the signal to fft_length first
        padded = b.node("Pad", [a, b.const(np.int32([[0, 0], [0, 3]]))], {"T": F32})
        return b.part("ComplexAbs", b.rfft(padded, 11))
    if name.startswith("irfft"):
        n = 8 if name == "irfft_even" else 7
        return b.node("IRFFT", [b.cplx(a, bb), b.const(np.int32([n]))], {})
    if name == "fft_ifft":
        re = b.part("Real", b.node("FFT", [b.cplx(a, bb)], {}))
        im = b.part("Imag", b.node("IFFT", [b.cplx(bb, a)], {}))
        return b.add(b.mul(re, b.const(np.float32(0.7))), im)
    if name == "fft2d_fft3d":
        def part(op, fft, x, y):
            return b.part(op, b.node(fft, [b.cplx(x, y)], {}))
        s = b.add(b.mul(part("Real", "FFT2D", a, bb), b.const(np.float32(0.7))),
                  part("Imag", "IFFT2D", bb, a))
        s = b.add(s, b.mul(part("Real", "FFT3D", a, b.mul(a, bb)), b.const(np.float32(0.2))))
        return b.add(s, b.mul(part("Imag", "IFFT3D", bb, a), b.const(np.float32(3.0))))
    if name == "conj_angle":
        z = b.cplx(a, bb)
        im = b.part("Imag", b.node("Conj", [z], {"T": C64}))
        return b.add(b.mul(im, b.const(np.float32(2.0))), b.part("ComplexAbs", z))
    raise KeyError(name)


@pytest.mark.parametrize("name", FORWARD)
def test_forward_matches_tensorflow(name):
    b = G()
    x = FIX[f"{name}/in"]
    op = name.split("-")[0]
    inputs = [b.const(x)]
    attrs = {}
    if "-" in name or op in ("RFFT2D", "IRFFT2D"):
        k = 2 if op.endswith("2D") else 1
        last = int(name.split("-")[1]) if "-" in name else 8
        lengths = [x.shape[-2], last][-k:] if k == 2 else [last]
        if op == "RFFT2D":
            lengths = [3, 8]
        if op == "IRFFT2D":
            lengths = [4, 8]
        inputs.append(b.const(np.int32(lengths)))
    if op in ("ComplexAbs", "Angle", "Real", "Imag"):
        attrs = {"T": C64, "Tout": F32}
    if op == "Conj":
        attrs = {"T": C64}
    out = b.node(op, inputs, attrs, name="op")
    got = Session(b.g).run([out], {})[0]
    want = FIX[f"{name}/out"]
    assert got.dtype == want.dtype and got.shape == want.shape, name
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


GRADS = sorted({k.split("/")[0] for k in FIX.files if k.split("/")[0][0].islower()})


@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_tensorflow(name):
    b = G()
    a = FIX[f"{name}/a"]
    has_b = f"{name}/b" in FIX.files
    feeds = {"a:0": a}
    pa = b.ph("a", a)
    pb = None
    if has_b:
        feeds["b:0"] = FIX[f"{name}/b"]
        pb = b.ph("b", feeds["b:0"])
    y = _chain(name, b, pa, pb)
    loss = b.node("Sum", [b.mul(y, b.const(FIX[f"{name}/w"])),
                          b.const(np.arange(FIX[f"{name}/w"].ndim, dtype=np.int32))],
                  {"T": F32}, name="loss")
    xs = sorted(feeds)
    g2 = grad(b.g, [loss], xs)
    got = Session(g2).run([f"grad/{x[0]}:0" for x in xs], feeds)
    for x, v in zip(xs, got):
        np.testing.assert_allclose(v, FIX[f"{name}/d{x[0]}"], rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}: d/d{x}")


def test_cropping_rfft_gradient_by_finite_differences():
    """RFFT with fft_length 6 reads only x[..., :6]: the rest gets zero gradient."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 9))
    b = G()
    px = b.node("Placeholder", [], {"dtype": DType.DOUBLE}, name="x")
    z = b.node("RFFT", [px, b.const(np.int32([6]))], {"Treal": DType.DOUBLE, "Tcomplex": DType.COMPLEX128})
    w = rng.uniform(0.5, 1.5, (2, 4))
    parts = [b.node(op, [z], {"T": DType.COMPLEX128, "Tout": DType.DOUBLE})
             for op in ("Real", "Imag")]
    y = b.node("AddV2", [b.node("Mul", [parts[0], b.const(w)], {"T": DType.DOUBLE}),
                         b.node("Mul", [parts[1], b.const(w[::-1].copy())],
                                {"T": DType.DOUBLE})], {"T": DType.DOUBLE})
    loss = b.node("Sum", [y, b.const(np.int32([0, 1]))], {"T": DType.DOUBLE}, name="loss")
    got = Session(grad(b.g, [loss], ["x:0"])).run(["grad/x:0"], {"x:0": x})[0]
    fwd = Session(b.g)
    numeric = numeric_gradient(lambda v: float(fwd.run([loss], {"x:0": v})[0]), x, eps=1e-6)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-6)
    assert np.all(got[:, 6:] == 0)


def test_input_shorter_than_fft_length_is_an_error():
    b = G()
    b.node("RFFT", [b.const(np.zeros((2, 5), np.float32)), b.const(np.int32([8]))], {},
           name="op")
    with pytest.raises(TfgError, match="must have length of at least 8 but got: 5"):
        Session(b.g).run(["op:0"], {})


def test_transforms_of_no_points_give_tensorflows_shapes():
    """Empty inputs and a zero fft_length: numpy refuses a transform of 0 points; the
    kernels give TensorFlow's output shapes (its sums over no points are 0)."""
    def call(op, attrs, *ins):
        return get_kernel(op).fn(KernelContext(Graph().add_node("n", op), attrs), *ins)
    real = {"Treal": DType.FLOAT, "Tcomplex": DType.COMPLEX64}
    assert call("RFFT", real, np.ones((0, 4), np.float32), np.array([4], np.int32)).shape == (0, 3)
    assert call("FFT", {"Tcomplex": DType.COMPLEX64}, np.ones((2, 0), np.complex64)).shape == (2, 0)
    assert call("IRFFT", real, np.ones((0, 3), np.complex64), np.array([4], np.int32)).shape == (0, 4)
    zero = call("RFFT", real, np.ones(4, np.float32), np.array([0], np.int32))
    assert zero.shape == (1,) and zero.dtype == np.complex64 and zero[0] == 0
