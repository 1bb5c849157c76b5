"""The GPU checks of tests/gpu_suite.py on CuPy and a real NVIDIA GPU.

Skipped without CuPy or a visible GPU (CI runs the same checks on the stand-in:
tests/test_gpu_standin.py). On the GPU machine: tools/gpu_check.sh."""
import pytest

cupy = pytest.importorskip("cupy")

from tests.gpu_suite import *  # noqa: E402,F401,F403  (the shared GPU checks, on CuPy)
from tfg.executor.devices import STANDIN_ENV, array_module, local_gpu_count  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.delenv(STANDIN_ENV, raising=False)
    if local_gpu_count() < 1:
        pytest.skip("no GPU visible to CuPy")
    return array_module("GPU")  # registers cupy.ndarray as device memory
