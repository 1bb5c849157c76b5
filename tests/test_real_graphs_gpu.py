"""The real-model and real-loop suites on a GPU: every case of tests/fixtures/real_models,
real_models_hub and real_loops (Keras applications, TF1 dynamic_rnn and beam search over
TensorArrays, Keras RNNs over TensorLists, functional While/If, their gradients) through the
CLI on `gpu:1`, and partitioned by the cost model between `cpu:1` and `gpu:1`
(tests/case_check.py's `gpu` and `gpu_split` modes), against TensorFlow's values with each
case's tolerances.

Skipped without CuPy and a visible GPU; on the GPU machine tools/gpu_check.sh runs it. With
TFG_GPU_STANDIN=1 it runs on the numpy stand-in instead (a dry run of the GPU paths, ~10 min
on 2 cores; CI runs the stand-in on the smaller checks of tests/test_gpu_standin.py).
"""
import pytest

from case_check import check_case
from conftest import FIXTURES
from tfg.executor.devices import local_gpu_count

pytestmark = pytest.mark.gpu

ROOTS = ("real_models", "real_models_hub", "real_loops")
CASES = [f"{root}/{p.name}" for root in ROOTS for p in sorted((FIXTURES / root).iterdir())
         if (p / "case.json").exists()]


@pytest.fixture(scope="module")
def gpu_present():
    if local_gpu_count() < 1:
        pytest.skip("no GPU visible to CuPy (TFG_GPU_STANDIN=1 runs the stand-in)")


@pytest.mark.parametrize("mode", ["gpu", "gpu_split"])
@pytest.mark.parametrize("case", CASES)
def test_real_graph_on_gpu(case, mode, gpu_present):
    check_case(str(FIXTURES / case), mode, timeout=240)


def test_suite_has_its_cases():
    assert len(CASES) >= 55, len(CASES)
