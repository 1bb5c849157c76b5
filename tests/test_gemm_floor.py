"""Small convolution GEMMs on one BLAS thread inside steps that give BLAS more
(tfg/kernels/gemm_floor.py, conv_gemm.prepared); the large ones keep the step's count."""
import numpy as np
import pytest

from tfg.executor import blas
from tfg.kernels import conv_gemm, conv_threads, gemm_floor
from tfg.kernels.conv_geom import Geom

rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def unconfigured(monkeypatch):
    monkeypatch.delenv(gemm_floor.ENV_VAR, raising=False)
    yield
    conv_threads.configure(1)


@pytest.fixture
def two_blas_threads():
    """The library at two threads, as a step's 'adaptive' count on a quiet machine sets it;
    yields a setter that records each count and sets the library's."""
    backend = blas._get_backend()
    if backend is None:
        pytest.skip("no controllable BLAS in this process")
    saved, sets = backend.get(), []
    backend.set(2)

    def setter(n):
        sets.append(n)
        backend.set(n)
    setter.sets = sets
    yield setter
    backend.set(saved)


def _geom(xs, ws, padding="SAME"):
    return Geom({"padding": padding.encode(), "strides": [1, 1, 1, 1]},
                xs[1], xs[2], ws[0], ws[1])


def _reference(x, w, g):
    """The convolution by definition (float64), stride 1."""
    n, h, wd, c = x.shape
    kh, kw, _, oc = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (g.pt, g.pb), (g.pl, g.pr), (0, 0)))
    out = np.zeros((n, g.oh, g.ow, oc))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, i:i + g.oh, j:j + g.ow], w[i, j])
    return out


# (input, filter), all between OpenBLAS's own one-thread size and the floor: NASNet 1x1s
# (18 x 176 x 176 and 288 x 44 x 44 = 557K multiply-adds), a skinny 2-row 1x1 (GEMVs), a
# 3x3 on a 3-channel stem (the thin path, 2M) and a 3x3 of 32 channels (the plain path, 1.3M)
SMALL = [((2, 3, 3, 176), (1, 1, 176, 176)), ((2, 12, 12, 44), (1, 1, 44, 44)),
         ((2, 1, 1, 512), (1, 1, 512, 600)), ((2, 48, 48, 3), (3, 3, 3, 16)),
         ((1, 12, 12, 32), (3, 3, 32, 32))]


@pytest.mark.parametrize("xs,ws", SMALL)
def test_a_small_gemm_runs_on_one_blas_thread_and_gives_its_values(xs, ws,
                                                                   two_blas_threads):
    g = _geom(xs, ws)
    run = conv_gemm.prepared(xs, ws, g)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    with blas.blas_limit(1):  # the one-thread values (two threads may round otherwise)
        plain = conv_gemm.nhwc(x, w, g)
    two_blas_threads(2)
    sets = two_blas_threads.sets
    sets.clear()
    conv_threads.configure(2, two_blas_threads)  # a step that gives BLAS two threads
    got = run(x, w)
    assert sets == [1, 2]  # one thread around the GEMM, the step's count after
    np.testing.assert_array_equal(got, plain)
    np.testing.assert_allclose(got, _reference(x, w, g), rtol=1e-4, atol=1e-4)
    two_blas_threads(1)  # a one-thread step (the library set by blas_limit): nothing to set
    conv_threads.configure(1, two_blas_threads)
    sets.clear()
    np.testing.assert_array_equal(run(x, w), plain)
    assert sets == []


def test_a_gemm_at_the_floor_keeps_the_steps_threads():
    xs, ws = (2, 32, 32, 64), (1, 1, 64, 32)  # 2048 x 64 x 32 = 4M: at the floor
    assert xs[0] * xs[1] * xs[2] * ws[2] * ws[3] == gemm_floor.SMALL_GEMM_MACS
    run = conv_gemm.prepared(xs, ws, _geom(xs, ws))
    sets = []
    conv_threads.configure(2, sets.append)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    np.testing.assert_array_equal(run(x, w), conv_gemm.nhwc(x, w, _geom(xs, ws)))
    assert sets == []


def test_the_floor_from_the_environment(monkeypatch):
    run = lambda x: x  # noqa: E731
    mid = 1 << 20  # between OpenBLAS's own one-thread size and the floor
    assert gemm_floor.serial_below_floor(run, gemm_floor.SMALL_GEMM_MACS) is run
    assert gemm_floor.serial_below_floor(run, mid) is not run
    # OpenBLAS keeps these on one thread itself: nothing to set
    assert gemm_floor.serial_below_floor(run, gemm_floor.OPENBLAS_SERIAL_MACS) is run
    monkeypatch.setenv(gemm_floor.ENV_VAR, "0")  # no floor: never wrapped
    assert gemm_floor.gemm_floor() == 0
    assert gemm_floor.serial_below_floor(run, mid) is run
    monkeypatch.setenv(gemm_floor.ENV_VAR, str(mid // 2))
    assert gemm_floor.serial_below_floor(run, mid) is run
    monkeypatch.setenv(gemm_floor.ENV_VAR, "lots")  # unreadable: the default
    assert gemm_floor.gemm_floor() == gemm_floor.SMALL_GEMM_MACS


def test_a_failing_small_gemm_restores_blas():
    sets = []
    conv_threads.configure(2, sets.append)

    def boom(x, w):
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        gemm_floor.serial_below_floor(boom, 1 << 20)(1, 2)
    assert sets == [1, 2]


def test_nested_serial_calls_restore_once_after_the_last():
    sets = []
    conv_threads.configure(2, sets.append)
    inner = gemm_floor.serial_below_floor(lambda: sets.append("inner"), 1 << 20)
    outer = gemm_floor.serial_below_floor(lambda: inner(), 1 << 20)
    outer()
    assert sets == [1, "inner", 2]
