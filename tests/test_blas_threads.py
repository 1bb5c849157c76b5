"""The BLAS thread cap a Session applies while a step runs (tfg/executor/blas.py)."""
import json
import os
import threading

import numpy as np
import pytest

from tfg.errors import TfgInputError
from tfg.executor import Session, blas
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

needs_control = pytest.mark.skipif(not blas.blas_control_available(),
                                   reason="no controllable BLAS in this process")


@pytest.fixture
def clean_env(monkeypatch):
    for k in (blas.ENV_VAR,) + blas._USER_ENV:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def test_default_is_adaptive_and_auto_is_half_the_cores(clean_env):
    assert blas.resolve_blas_threads(None) == blas.ADAPTIVE
    assert blas.resolve_blas_threads(" Adaptive ") == blas.ADAPTIVE
    assert blas.resolve_blas_threads("auto") == max(1, (os.cpu_count() or 1) // 2)
    assert Session(_graph()).blas_threads == blas.ADAPTIVE


def test_explicit_values(clean_env):
    assert blas.resolve_blas_threads(3) == 3
    assert blas.resolve_blas_threads("2") == 2
    assert blas.resolve_blas_threads(0) is None  # leave BLAS alone


def test_user_blas_env_wins_over_the_default(clean_env):
    clean_env.setenv("OPENBLAS_NUM_THREADS", "4")
    assert blas.resolve_blas_threads("auto") is None
    assert blas.resolve_blas_threads(None) is None
    assert blas.resolve_blas_threads("adaptive") is None
    assert blas.resolve_blas_threads(2) == 2  # an explicit option still applies


def test_env_var(clean_env):
    clean_env.setenv(blas.ENV_VAR, "3")
    assert blas.resolve_blas_threads(None) == 3
    clean_env.setenv(blas.ENV_VAR, "many")
    with pytest.raises(TfgInputError, match=r"\$TFG_BLAS_THREADS.*'many'"):
        blas.resolve_blas_threads(None)


@pytest.mark.parametrize("bad", [-1, 1.5, "x", True])
def test_bad_values_are_input_errors(clean_env, bad):
    with pytest.raises(TfgInputError, match="blas_threads"):
        blas.resolve_blas_threads(bad)
    with pytest.raises(TfgInputError, match="blas_threads"):
        Session(_graph(), blas_threads=bad)


@needs_control
def test_limit_applies_inside_and_restores():
    before = blas.current_blas_threads()
    with blas.blas_limit(1):
        assert blas.current_blas_threads() == 1
        with blas.blas_limit(3):  # nested: the smallest active limit holds
            assert blas.current_blas_threads() == 1
        assert blas.current_blas_threads() == 1
    assert blas.current_blas_threads() == before
    with blas.blas_limit(None):
        assert blas.current_blas_threads() == before


@needs_control
def test_adaptive_limit_takes_the_measured_count_each_time(monkeypatch):
    before = blas.current_blas_threads()
    counts = iter([1, 2])
    monkeypatch.setattr(blas, "adaptive_threads", lambda: next(counts))
    with blas.blas_limit(blas.ADAPTIVE):
        assert blas.current_blas_threads() == 1  # re-decided per step: loaded ...
    with blas.blas_limit(blas.ADAPTIVE):
        assert blas.current_blas_threads() == 2  # ... then quiet
    assert blas.current_blas_threads() == before


@needs_control
def test_adaptive_gives_chunked_kernels_every_core_even_under_load(monkeypatch):
    from tfg.kernels import conv_threads
    monkeypatch.setattr(blas, "adaptive_threads", lambda: 1)  # loaded: one BLAS thread
    monkeypatch.setattr(blas, "usable_cores", lambda: 2)
    monkeypatch.delenv(conv_threads.ENV_VAR, raising=False)
    with blas.blas_limit(blas.ADAPTIVE):
        assert blas.current_blas_threads() == 1
        assert conv_threads.workers() == 2  # they share chunks: a slow thread takes fewer
        assert conv_threads._restore == 1  # BLAS goes back to one thread after a call
    with blas.blas_limit(1):  # an explicit count caps them too
        assert conv_threads.workers() == 1
    assert conv_threads.workers() == 1  # outside steps: the calling thread only


@needs_control
def test_overlapping_steps_restore_the_original():
    before = blas.current_blas_threads()
    a, b = blas.blas_limit(1), blas.blas_limit(1)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)  # b still runs: the cap stays
    assert blas.current_blas_threads() == 1
    b.__exit__(None, None, None)
    assert blas.current_blas_threads() == before


@needs_control
def test_ctypes_backend_drives_openblas():
    backend = blas._ctypes_backend()
    if backend is None:
        pytest.skip("numpy's BLAS here is not OpenBLAS")
    before = backend.get()
    try:
        backend.set(1)
        assert backend.get() == 1
    finally:
        backend.set(before)
    assert backend.get() == before


def _graph():
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": DType.FLOAT, "shape": Shape((4, 4))})
    g.add_node("y", "MatMul", ["x", "x"], {"T": DType.FLOAT})
    return g


@needs_control
def test_session_caps_blas_while_a_step_runs_and_computes_the_same(monkeypatch):
    import dataclasses

    from tfg.executor import plan as P

    seen = []
    real = P.get_kernel

    def spying_get_kernel(op, *args, **kw):
        kd = real(op, *args, **kw)
        orig = kd.fn

        def spy(*a):
            seen.append(blas.current_blas_threads())
            return orig(*a)

        return dataclasses.replace(kd, fn=spy)

    monkeypatch.setattr(P, "get_kernel", spying_get_kernel)
    before = blas.current_blas_threads()
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    capped = Session(_graph(), blas_threads=1).run("y", {"x": x})
    free = Session(_graph(), blas_threads=0).run("y", {"x": x})
    np.testing.assert_array_equal(capped, x @ x)
    np.testing.assert_array_equal(free, x @ x)
    assert seen == [1, before]
    assert blas.current_blas_threads() == before


@needs_control
def test_concurrent_sessions_leave_the_library_as_it_was():
    before = blas.current_blas_threads()
    sess = Session(_graph(), blas_threads=1)
    x = np.ones((4, 4), np.float32)
    errors = []

    def work():
        try:
            for _ in range(50):
                np.testing.assert_array_equal(sess.run("y", {"x": x}), x @ x)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert blas.current_blas_threads() == before


def _cli_graph(tmp_path):
    from tfg.graphdef import io

    path = tmp_path / "mm.pb"
    io.save(_graph(), str(path))
    return path


def test_cli_blas_threads_option_runs_the_same(tmp_path):
    from helpers import tfg_cli

    path = _cli_graph(tmp_path)
    x = "[[1,2,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]"
    outs = [tfg_cli("run", path, "--feed", f"x={x}", "--fetch", "y", "--format", "json",
                    *extra).stdout for extra in ([], ["--blas-threads", "1"],
                                                 ["--blas-threads", "0"])]
    assert outs[0] == outs[1] == outs[2]
    assert json.loads(outs[0])["y"]["value"] == [[1, 4, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0],
                                                 [0, 0, 0, 1]]


@pytest.mark.parametrize("args,env,match", [
    (["--blas-threads", "-1"], {}, "--blas-threads"),
    (["--blas-threads", "two"], {}, "--blas-threads"),
    ([], {blas.ENV_VAR: "lots"}, "TFG_BLAS_THREADS"),
    (["--blas-threads", "1", "--cluster", "worker=127.0.0.1:1"], {}, "--blas-threads"),
])
def test_cli_bad_blas_threads_is_a_usage_error(tmp_path, monkeypatch, args, env, match):
    from helpers import tfg_cli

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    x = "[[1,2,3,4],[1,2,3,4],[1,2,3,4],[1,2,3,4]]"
    p = tfg_cli("run", _cli_graph(tmp_path), "--feed", f"x={x}", "--fetch", "y", *args,
                check=False)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert match in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_openblas_core_names_the_kernels_or_none():
    """The benchmarks record it: a non-empty name where numpy's BLAS is a findable OpenBLAS
    (what blas_control_available's ctypes route finds), None where there is none."""
    core = blas.openblas_core()
    if blas._openblas_paths():
        assert isinstance(core, str) and core and core == core.strip()
    else:
        assert core is None
