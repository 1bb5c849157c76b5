"""Shared pytest fixtures: where the conformance cases and the project's fixtures are."""
import compileall
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
# The shared conformance cases sit beside a developer's checkout; a user's clone has none.
# Tests reach them only through CONFORMANCE, conformance_cases() and the conformance_dir
# fixture (or tools/fuzz.py's seeds, tests/gpu_suite.py): .ci/run reruns the files naming these
# in a clone without ../shared, where they must skip or pass.
CONFORMANCE = pathlib.Path(os.environ.get("TFG_CONFORMANCE", ROOT.parent / "shared" / "conformance"))


def pytest_configure(config):
    """Compile tfg's modules to bytecode once, in the controller, before any test runs.

    Hundreds of tests run `python -m tfg` as a subprocess. Where PYTHONDONTWRITEBYTECODE is
    set (CI images often set it) or the install is editable, no process leaves a .pyc behind,
    so every one of them compiled all of tfg's ~390 modules again: 0.4 s a process, a third of
    the CLI tests' time. A stale .pyc is never used (Python checks the source's mtime), and a
    read-only tree is simply left as it is."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    compileall.compile_dir(str(ROOT / "tfg"), quiet=2, workers=1)


def conformance_cases():
    if not CONFORMANCE.is_dir():
        return []
    return sorted(p for p in CONFORMANCE.iterdir() if (p / "case.json").exists())


@pytest.fixture
def conformance_dir():
    if not CONFORMANCE.is_dir():
        pytest.skip("../shared/conformance is not present")
    return CONFORMANCE


@pytest.fixture
def numpy_convs(monkeypatch):
    """Conv2D on tfg's numpy paths even where oneDNN is installed: for the tests of those
    paths (tests/test_onednn.py covers oneDNN's)."""
    monkeypatch.setenv("TFG_ONEDNN", "0")


@pytest.fixture(autouse=True)
def warm_process(monkeypatch):
    """Every test runs as a long-lived process does, after some Session's second step
    (tfg/kernels/jit.py's warm flag): float32 Sigmoid, swish and Tanh on vector_math's
    compiled loops where numba is installed, from a Session's first step on. So a test's
    values do not depend on which tests its worker ran before it, and two Sessions compared
    step by step run the same kernels. `numpy_exp` pins the numpy functions instead."""
    from tfg.kernels import jit
    monkeypatch.setattr(jit, "_state", dict(jit._state, warm=True))


@pytest.fixture
def numpy_exp(monkeypatch):
    """Sigmoid, swish and Tanh on numpy's functions whatever the steps (vector_math's loops
    held off): for the tests of those paths (tests/test_vector_math.py covers the loops)."""
    from tfg.kernels import vector_math
    monkeypatch.setattr(vector_math, "_loaded", [None])
