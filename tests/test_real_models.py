"""The real-model suite (issue 22): graphs of models no one here wrote, frozen by TensorFlow
(tools/gen_real_models.py), through the tfg CLI in the shared conformance checker's modes
(tests/case_check.py: run, optimize, pipeline on 3 CPU devices, cluster on 2 workers); grad
cases go through `tfg grad` first and must give TensorFlow's tf.gradients values.

What runs where (CI has 2 cores; this file stays under ~4 minutes there: 2 min 4 s on the
shared 2-core dev machine at load average 3-4, TensorFlow absent):
- every committed case in `run` and `optimize` mode (the real-model sweep's cases,
  RUN_ONLY_CI, in `run` mode only);
- a representative subset in `pipeline` and `cluster` mode (PIPELINE_CI, CLUSTER_CI: a
  ResNet, a depthwise CNN, the MobileNetV2 gradient, a Keras LSTM, a TF1 RNN gradient, the
  beam search, the attention seq2seq gradient);
- every other (case, mode) pair is `slow`, run with TFG_REAL_MODELS=full;
- where TensorFlow is installed (TFG_TF_PYTHON, or this interpreter), what `tfg optimize`,
  `tfg place` and `tfg partition` write of every case (after `tfg grad` for grad cases) is
  imported into TensorFlow and run there (tools/tf_run_graph.py): TensorFlow's values must be
  the expected ones (63 TensorFlow runs of ~8 s each: about 8 more minutes, so CI without
  TensorFlow skips them);
- the full-size keras.applications models (ResNet50, DenseNet121, InceptionV3, Xception, ...,
  tens of MB each) are generated on demand with TensorFlow (TFG_TF_PYTHON) and run in every
  mode by the slow test at the end (TFG_REAL_MODELS=full too).

Every committed case passes in every mode, and TensorFlow runs what tfg writes of each. A case
that needs a piece another change brings is `xfail(strict=True)` naming it (XFAIL, TF_XFAIL,
LARGE_XFAIL; all empty now), so it turns into a failure the day that piece lands and the mark
must go.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from case_check import check_case, grad_name, load_meta, node_of
from conftest import FIXTURES, ROOT
from helpers import tfg_cli
from tfg.executor.distributed.local import LocalCluster

CASE_ROOT = FIXTURES / "real_models"
CASES = sorted(p.name for p in CASE_ROOT.iterdir() if (p / "case.json").exists())
MODES = ["run", "optimize", "pipeline", "cluster"]
FULL = os.environ.get("TFG_REAL_MODELS") == "full"

PIPELINE_CI = {"resnet_small", "mobilenetv2_grad", "keras_lstm_grad", "tf1_dynamic_lstm_grad",
               "tf1_beam_search"}
CLUSTER_CI = {"efficientnet_small", "keras_lstm", "tf1_bidirectional_lstm_grad",
              "tf1_attention_seq2seq_grad", "tf1_beam_search"}

# The real-model sweep's cases (each found a missing op or gradient): `run` mode only in CI
# (about 15 s for the seven on a quiet 2-core machine); their other modes with
# TFG_REAL_MODELS=full.
RUN_ONLY_CI = {"keras_unet_grad", "keras_deeplab_grad", "tf2_signal_ops_grad",
               "keras_gru_simplernn_functional", "tf1_train_step", "tf1_atrous_sparse_grad",
               "tf1_nested_while_grad"}

# (case, mode or None for every mode) -> the missing piece. Empty: every committed case passes
# in every mode since grouped Conv2D, Einsum, MatrixBandPart and the one front door landed.
XFAIL = {}


def _xfail_reason(case, mode):
    return XFAIL.get((case, mode)) or XFAIL.get((case, None))


def _params():
    out = []
    for case in CASES:
        for mode in MODES:
            marks = []
            ci = mode in ("run", "optimize") or (mode == "pipeline" and case in PIPELINE_CI) \
                or (mode == "cluster" and case in CLUSTER_CI)
            if case in RUN_ONLY_CI:
                ci = mode == "run"
            if not ci:
                marks += [pytest.mark.slow,
                          pytest.mark.skipif(not FULL, reason="set TFG_REAL_MODELS=full")]
            reason = _xfail_reason(case, mode)
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            out.append(pytest.param(case, mode, marks=marks, id=f"{case}-{mode}"))
    return out


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2) as c:
        yield c.spec


@pytest.mark.parametrize("case,mode", _params())
def test_real_model(case, mode, request):
    spec = request.getfixturevalue("cluster") if mode == "cluster" else None
    check_case(str(CASE_ROOT / case), mode, cluster=spec)


def test_suite_covers_the_issue():
    """At least 15 models, the families the issue names, and the gradient cases it names."""
    metas = {c: load_meta(str(CASE_ROOT / c)) for c in CASES}
    assert len(metas) >= 15
    grads = {c for c, m in metas.items() if m["kind"] == "grad"}
    assert {"mobilenetv2_grad", "tf1_dynamic_lstm_grad", "tf1_bidirectional_lstm_grad"} <= grads
    ops = set().union(*(m["ops"] for m in metas.values()))
    for op in ("TensorArrayV3", "TensorArrayWriteV3", "TensorArrayGatherV3", "TopKV2",
               "ReverseSequence", "DepthwiseConv2dNative", "Erfc", "Einsum",
               "TensorListSetItem", "While", "StatefulPartitionedCall",
               # the sweep's (tools/gen_real_models_more.py, gen_real_models_tf1.py): resizes,
               # FFTs, atrous convs, sparse embeddings, optimizer updates
               "ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "RFFT", "ComplexAbs",
               "SpaceToBatchND", "DepthToSpace", "SparseSegmentMean",
               "ApplyCenteredRMSProp", "ApplyAdadelta", "Conv2DBackpropInput"):
        assert op in ops, op
    for c, m in metas.items():
        assert os.path.getsize(CASE_ROOT / c / "graph.pb") < 4_000_000, c


LARGE = ["resnet50", "densenet121", "mobilenetv2_full", "mobilenetv3small_full",
         "efficientnetb0", "efficientnetv2b0", "inceptionv3", "xception", "nasnetmobile",
         "convnexttiny"]
LARGE_XFAIL = {}  # name -> the missing piece, as XFAIL


def made_on_demand(tmp_path_factory, what, tool, flag, needs=None):
    """Cases that `TFG_TF_PYTHON tools/<tool> <flag> --out DIR` makes into a fresh folder
    (skipped without TFG_TF_PYTHON, or without the module `needs` in it)."""
    tf_python = os.environ.get("TFG_TF_PYTHON")
    if not tf_python:
        pytest.skip(f"{what} are made by TensorFlow: set TFG_TF_PYTHON")
    if needs and subprocess.run([tf_python, "-c", f"import {needs}"],
                                capture_output=True).returncode:
        pytest.skip(f"TFG_TF_PYTHON has no {needs}")
    out = tmp_path_factory.mktemp(tool.replace(".py", ""))
    subprocess.run([tf_python, str(ROOT / "tools" / tool), flag, "--out", str(out)],
                   check=True, timeout=3600)
    return out


@pytest.fixture(scope="module")
def large_cases(tmp_path_factory):
    return made_on_demand(tmp_path_factory, "the full-size models", "gen_real_models.py",
                          "--large")


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.skipif(not FULL, reason="set TFG_REAL_MODELS=full (and TFG_TF_PYTHON)")
@pytest.mark.parametrize("name", LARGE)
def test_large_real_model_every_mode(name, large_cases, request):
    if name in LARGE_XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=LARGE_XFAIL[name]))
    spec = request.getfixturevalue("cluster")
    for mode in MODES:
        check_case(str(large_cases / name), mode, cluster=spec, timeout=1200)


def _tf_python():
    for py in filter(None, [os.environ.get("TFG_TF_PYTHON"), sys.executable]):
        p = subprocess.run([py, "-c", "import tensorflow"], capture_output=True, timeout=120)
        if p.returncode == 0:
            return py
    return None


TF_PYTHON = _tf_python()
TF_STAGES = ["optimize", "place", "partition"]
# What TensorFlow cannot take back, and why (case, stage or None) -> reason. Empty since
# partitioning copies small Consts to each device that reads them (a dilated conv's gradient
# placed apart from the block_shape Const it shares with the forward conv: TensorFlow's
# SpaceToBatchND shape function refused a block_shape behind a _Recv at import).
TF_XFAIL = {}


def _tf_params():
    out = []
    for case in CASES:
        for stage in TF_STAGES:
            marks = []
            reason = TF_XFAIL.get((case, stage)) or TF_XFAIL.get((case, None))
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            out.append(pytest.param(case, stage, marks=marks, id=f"{case}-{stage}"))
    return out


@pytest.mark.skipif(TF_PYTHON is None, reason="needs TensorFlow (TFG_TF_PYTHON)")
@pytest.mark.parametrize("case,stage", _tf_params())
def test_tensorflow_runs_what_tfg_writes(case, stage, tmp_path):
    check_tensorflow_runs(CASE_ROOT / case, stage, tmp_path)


def check_tensorflow_runs(d, stage, tmp_path):
    """Import what `tfg <stage>` writes of case folder d into TensorFlow and run it there:
    TensorFlow's values must be the expected ones."""
    case = d.name
    meta = load_meta(str(d))
    graph = (d / "graph.pb").read_bytes()
    if meta["kind"] == "grad":
        graph = tfg_cli("grad", d / "graph.pb", "--ys", ",".join(meta["ys"]), "--xs",
                        ",".join(meta["xs"])).stdout
        fetches, keys = [grad_name(x) for x in meta["xs"]], meta["xs"]
    else:
        fetches = keys = meta["fetches"]
    if stage == "optimize":
        keep = {node_of(f) for f in fetches} | set(meta.get("targets", [])) \
            | set(meta.get("init", []))
        args = ["optimize", "-", "--keep", ",".join(sorted(keep))]
    else:
        args = [stage, "-", "--devices", "cpu:3"]
    out_graph = tmp_path / "out.pb"
    out_graph.write_bytes(tfg_cli(*args, input=graph, timeout=300).stdout)
    cmd = [TF_PYTHON, str(ROOT / "tools" / "tf_run_graph.py"), str(out_graph), "--feeds",
           str(d / "feeds.npz"), "--cpus", "3", "-o", str(tmp_path / "tf.npz")]
    if stage == "partition":  # TensorFlow runs a partition whole, as its workers do
        cmd.append("--run-sends")
    for f in fetches:
        cmd += ["--fetch", f]
    for flag, names in (("--init", meta.get("init", [])), ("--target", meta.get("targets", []))):
        for name in names:
            cmd += [flag, name]
    if meta.get("steps", 1) > 1:
        cmd += ["--steps", str(meta["steps"])]
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    got, want = np.load(tmp_path / "tf.npz"), np.load(d / "expected.npz")
    for f, k in zip(fetches, keys):
        if want[k].dtype.kind in "biu":
            np.testing.assert_array_equal(got[f], want[k], err_msg=f"{case} after {stage}: {f}")
        else:
            np.testing.assert_allclose(got[f], want[k], rtol=meta["rtol"], atol=meta["atol"],
                                       err_msg=f"{case} after tfg {stage}: {f}")
