"""OpenBLAS's idle workers stop spinning soon after a call once tfg ran a step
(tfg/executor/blas_spin.py). Each case runs in a fresh interpreter: the spin can only change
while no other thread runs, and it changes the whole process."""
import inspect
import os
import subprocess
import sys
import textwrap

import pytest

import tfg.cli
from tfg.executor import blas_spin
from tfg.executor.blas import _openblas_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A 2-thread GEMM, then 0.2 s asleep: the process CPU used while asleep is the workers' spin.
SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from tfg.executor import blas
    a = np.random.default_rng(0).random((400, 400))
    want = a @ a
    if sys.argv[1] == "step":
        from tfg import builder as tb
        from tfg.executor import Session
        with tb.Graph() as g:
            x = tb.placeholder(tb.float32, [2, 2], name="x")
            tb.matmul(x, x, name="y")
        Session(g.graph, blas_threads=2).run("y", {"x": np.eye(2, dtype=np.float32)})
    backend = blas._get_backend()
    backend.set(2)
    assert np.array_equal(a @ a, want)
    t = time.process_time()
    time.sleep(0.2)
    asleep = time.process_time() - t
    import ctypes
    lib = ctypes.CDLL(blas._openblas_paths()[0])
    print(asleep, backend.get(), lib.openblas_thread_timeout())
""")


def _spin_cpu(mode, timeout=None):
    """(CPU seconds used while asleep after a 2-thread GEMM, BLAS threads then, the spin
    exponent the library holds: 0 when it kept its built-in one)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env["PYTHONPATH"] = ROOT
    if timeout is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = str(timeout)
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    cpu, threads, spin = out.stdout.split()
    return float(cpu), int(threads), int(spin)


@pytest.fixture
def spinning_openblas():
    """Skip unless this process's BLAS is an OpenBLAS with worker threads that keeps its
    built-in spin when left alone (0.1 s of a core after each call, unless the machine's
    load starves the worker)."""
    if (os.cpu_count() or 1) < 2 or not _openblas_paths():
        pytest.skip("no OpenBLAS with worker threads here")
    _, _, spin = _spin_cpu("plain")
    assert spin == 0  # nothing changes it without a tfg step


def test_a_step_makes_the_workers_sleep_soon_after_a_call(spinning_openblas):
    cpu, threads, spin = _spin_cpu("step")
    assert cpu < 0.03, f"{cpu:.3f} s of CPU while asleep: the workers still spin"
    assert spin == blas_spin.SPIN_LOG2_CYCLES
    assert threads == 2  # the restart kept the thread count


def test_the_users_timeout_is_left_alone(spinning_openblas):
    _, _, spin = _spin_cpu("step", timeout=28)  # OpenBLAS's own default, set by the user
    assert spin == 28


def test_nothing_happens_while_another_thread_runs(monkeypatch):
    import threading
    monkeypatch.setattr(blas_spin, "_done", False)
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert blas_spin.shorten_idle_spin(lambda: pytest.fail("looked for libraries")) is False
    finally:
        stop.set()
        other.join()
    assert blas_spin._done is False  # tried again later


def test_a_library_without_the_server_functions_is_left_alone(monkeypatch):
    monkeypatch.setattr(blas_spin, "_done", False)
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    monkeypatch.setattr(blas_spin.threading, "active_count", lambda: 1)
    assert blas_spin.shorten_idle_spin(lambda: ["libc.so.6", "/no/such/libopenblas.so"]) is False
    assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ


def test_the_command_line_sets_the_same_default_before_numpy_loads():
    source = inspect.getsource(tfg.cli.main)
    assert f'"OPENBLAS_THREAD_TIMEOUT", "{blas_spin.SPIN_LOG2_CYCLES}"' in source
