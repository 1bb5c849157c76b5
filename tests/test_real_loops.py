"""The real-loop sweep: loop graphs TensorFlow built (tools/gen_real_loops.py; TF1 v1 control
flow with TensorFlow's own RNN cells, decoders, scan/fold and nested conds, and TF2 functional
While / If with TensorList ops, Keras ConvLSTM and RNN variants; autoregressive decoding
loops of tools/gen_real_loops_decode.py: a GPT decoder's greedy loop with a KV cache grown by
concat or preallocated and scattered into, its teacher-forced loss, keras_hub's GPT-2
generate_step, a TF1 cross-attention greedy decoder), through the tfg CLI
(tests/case_check.py): `run`, `optimize`, `partition` (two CPU devices, not optimized
first) and `cluster` (two workers); grad cases go through `tfg grad` first and must give
TensorFlow's tf.gradients / GradientTape values; `_tfgrad` cases run the gradient graph
TensorFlow itself built (v1 stacks, control flow v2's gradient While with optionals).

CI runs every case in `run` mode and a few in each other mode (CI; each check starts 2-4
tfg processes, 1-3 s each on a quiet 2-core machine); every (case, mode) pair passes, the
others run with TFG_REAL_MODELS=full. What tfg optimize and partition write
of every case was also imported and run by TensorFlow 2.21 (tools/tf_run_graph.py, as
tests/test_real_models.py does), all giving TensorFlow's values, but one: TensorFlow refuses
`tfg grad | tfg partition --devices cpu:2` of tf2_gpt_teacher_forced_grad (an AddN in the
backward loop gets the KV cache's gradient of one iteration and a popped shape of another:
[2,2,10,4] vs [2,2,3,4]), which tfg runs correctly; the unpartitioned gradient graph runs
in TensorFlow with the right values.
"""
import os

import pytest

from case_check import check_case, load_meta
from conftest import FIXTURES
from tfg.executor.distributed.local import LocalCluster

CASE_ROOT = FIXTURES / "real_loops"
CASES = sorted(p.name for p in CASE_ROOT.iterdir() if (p / "case.json").exists())
MODES = ["run", "optimize", "partition", "cluster"]
FULL = os.environ.get("TFG_REAL_MODELS") == "full"
CI = {"optimize": {"tf1_beam_search_lstm", "tf2_loops_functional", "tf1_cfv2_tfgrad",
                   "keras_convlstm_functional", "tf2_lstm_tape_tfgrad",
                   "tf2_gpt_kvconcat_functional"},
      "partition": {"tf1_loop_in_cond_grad", "tf1_cfv2_tfgrad", "tf2_beam_search_functional",
                    "tf1_multirnn_timemajor_grad", "tf1_ctc_dense_grad",
                    "tf2_gpt_kvscatter_teacher_forced_grad"},
      "cluster": {"tf1_cfv2_tfgrad", "tf2_beam_search_functional",
                  "tf2_dynamic_shapes_functional", "hub_gpt2_generate_functional"}}


def _params():
    out = []
    for case in CASES:
        for mode in MODES:
            marks = []
            if mode != "run" and case not in CI[mode]:
                marks += [pytest.mark.slow,
                          pytest.mark.skipif(not FULL, reason="set TFG_REAL_MODELS=full")]
            out.append(pytest.param(case, mode, marks=marks, id=f"{case}-{mode}"))
    return out


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2) as c:
        yield c.spec


@pytest.mark.parametrize("case,mode", _params())
def test_real_loop(case, mode, request):
    spec = request.getfixturevalue("cluster") if mode == "cluster" else None
    check_case(str(CASE_ROOT / case), mode, cluster=spec)


def test_sweep_covers_its_loops():
    """The loop constructs the sweep is for are in its graphs, and the fixtures stay small."""
    metas = {c: load_meta(str(CASE_ROOT / c)) for c in CASES}
    ops = set().union(*(m["ops"] for m in metas.values()))
    for op in ("Enter", "TensorArrayScatterV3", "StackPushV2", "StackPopV2", "GatherNd",
               "SelectV2", "TopKV2", "ArgMax", "StatelessWhile", "StatelessIf", "While",
               "TensorListPushBack", "OptionalFromValue", "OptionalGetValue", "Conv2D",
               "TensorScatterUpdate", "TensorScatterAdd", "Empty", "XlaDynamicUpdateSlice",
               "Einsum", "BatchMatMulV2", "SparseSoftmaxCrossEntropyWithLogits"):
        assert op in ops, op
    assert {m["kind"] for m in metas.values()} == {"run", "grad"}
    size = sum(f.stat().st_size for f in CASE_ROOT.rglob("*") if f.is_file())
    assert size < 2_100_000, size
