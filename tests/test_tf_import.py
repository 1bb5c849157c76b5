"""TensorFlow loads and runs what tfg writes: the output of `tfg grad`, `tfg optimize`,
`tfg place` and `tfg partition` on every shared conformance case is imported into TensorFlow
(`import_graph_def`, which checks every node, attr, edge and colocation reference) and run
there, and TensorFlow's values equal the case's expected ones.

Needs TensorFlow, which is never a tfg dependency: set TFG_TF_PYTHON to a Python that imports
tensorflow (e.g. a separate venv with `pip install tensorflow-cpu`), or run the tests with one.
Skips otherwise, and in a clone without ../shared/conformance.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, conformance_cases
from helpers import tfg_cli


def _tf_python():
    candidates = [os.environ.get("TFG_TF_PYTHON"), sys.executable]
    for py in filter(None, candidates):
        p = subprocess.run([py, "-c", "import tensorflow"], capture_output=True, timeout=120)
        if p.returncode == 0:
            return py
    return None


TF_PYTHON = _tf_python() if conformance_cases() else None
pytestmark = pytest.mark.skipif(TF_PYTHON is None,
                                reason="needs TensorFlow (TFG_TF_PYTHON) and the conformance cases")
STAGES = ["optimize", "place", "partition"]


def _grad_name(x):
    node, _, port = x.partition(":")
    return f"grad/{node}:0" if port in ("", "0") else f"grad/{node}_{port}:0"


def _case(d):
    meta = json.loads((d / "case.json").read_text())
    fetches = list(meta.get("fetches", []))
    if meta["kind"] == "grad":
        fetches = [_grad_name(x) for x in meta["xs"]]
    return meta, fetches


def _stage_args(stage, keep):
    if stage == "optimize":
        return ["optimize", "-", "--keep", ",".join(keep)]
    return [stage, "-", "--devices", "cpu:3"]


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("case", [p.name for p in conformance_cases()])
def test_tensorflow_runs_what_tfg_writes(case, stage, tmp_path):
    from conftest import CONFORMANCE

    d = CONFORMANCE / case
    meta, fetches = _case(d)
    graph = (d / "graph.pb").read_bytes()
    if meta["kind"] == "grad":  # tfg grad's own output goes through TensorFlow too
        graph = tfg_cli("grad", d / "graph.pb", "--ys", ",".join(meta["ys"]), "--xs",
                        ",".join(meta["xs"])).stdout
    keep = sorted({f.split(":")[0] for f in fetches} | set(meta.get("targets", []))
                  | set(meta.get("init", [])))
    out_graph = tmp_path / "out.pb"
    out_graph.write_bytes(tfg_cli(*_stage_args(stage, keep), input=graph).stdout)

    args = [TF_PYTHON, str(ROOT / "tools" / "tf_run_graph.py"), str(out_graph), "--feeds",
            str(d / "feeds.npz"), "--steps", str(meta.get("steps", 1)), "--cpus", "3",
            "-o", str(tmp_path / "tf.npz")]
    if stage == "partition":  # TensorFlow runs a partition whole, as its workers do
        args.append("--run-sends")
    for f in fetches:
        args += ["--fetch", f]
    for t in meta.get("targets", []):
        args += ["--target", t]
    for t in meta.get("init", []):
        args += ["--init", t]
    p = subprocess.run(args, capture_output=True, timeout=180)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    got = np.load(tmp_path / "tf.npz")
    want = np.load(d / "expected.npz")
    keys = meta["xs"] if meta["kind"] == "grad" else fetches
    for fetch, key in zip(fetches, keys):
        np.testing.assert_allclose(got[fetch], want[key], rtol=meta["rtol"], atol=meta["atol"],
                                   err_msg=f"{case} after tfg {stage}: {fetch}")
