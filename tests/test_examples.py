"""Every example's build.py writes a graph that `tfg info` reads and `tfg run` computes as
TensorFlow did (tests/fixtures/builder/example_<name>/expected.npz); the hand-written
gradients of the training examples agree with `tfg grad`."""
import json

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from helpers import tfg_cli

EXAMPLES = sorted(p.name for p in (ROOT / "examples").iterdir() if (p / "build.py").exists())


def _build(name, tmp_path):
    import subprocess
    import sys

    graph, feeds = tmp_path / f"{name}.pb", tmp_path / f"{name}_feeds.npz"
    subprocess.run([sys.executable, str(ROOT / "examples" / name / "build.py"), "-o",
                    str(graph), "--feeds", str(feeds)], check=True, capture_output=True,
                   timeout=120)
    return graph, feeds


def test_every_example_has_a_readme_and_index_line():
    index = (ROOT / "examples" / "README.md").read_text()
    for name in EXAMPLES:
        readme = (ROOT / "examples" / name / "README.md").read_text()
        assert "tfg run" in readme and f"examples/{name}/build.py" in readme
        assert f"({name}/)" in index


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_builds_and_info_reads_it(name, tmp_path):
    graph, _ = _build(name, tmp_path)
    out = tfg_cli("info", graph, "--json").stdout
    info = json.loads(out)
    assert json.dumps(info)  # a JSON summary of the graph
    text = tfg_cli("info", graph).stdout.decode()
    assert "nodes:" in text


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_like_tensorflow(name, tmp_path):
    graph, feeds = _build(name, tmp_path)
    case = FIXTURES / "builder" / f"example_{name}"
    meta = json.loads((case / "case.json").read_text())
    out = tmp_path / "out.npz"
    args = ["run", graph, "--feeds", feeds, "-o", out]
    for f in meta["fetches"]:
        args += ["--fetch", f]
    for t in meta["targets"]:
        args += ["--target", t]
    for t in meta["init"]:
        args += ["--init", t]
    args += ["--steps", meta["steps"]]
    tfg_cli(*args)
    got, want = np.load(out), np.load(case / "expected.npz")
    for f in meta["fetches"]:
        np.testing.assert_allclose(got[f], want[f], rtol=meta["rtol"], atol=meta["atol"],
                                   err_msg=f)


@pytest.mark.parametrize("name,xs", [("mlp", ["w1", "b1", "w2", "b2"]),
                                     ("linear_regression", ["w", "b"])])
def test_hand_written_gradients_match_tfg_grad(name, xs, tmp_path):
    graph, feeds = _build(name, tmp_path)
    with_grads = tmp_path / "grads.pb"
    tfg_cli("grad", graph, "--ys", "loss", "--xs", ",".join(f"{x}/read" for x in xs),
            "-o", with_grads)
    out = tmp_path / "out.npz"
    fetches = []
    for x in xs:
        fetches += ["--fetch", f"grad/{x}/read", "--fetch", f"grads/{x}"]
    tfg_cli("run", with_grads, "--feeds", feeds, "--init", "init", *fetches, "-o", out)
    got = np.load(out)
    for x in xs:
        np.testing.assert_allclose(got[f"grad/{x}/read"], got[f"grads/{x}"], rtol=1e-4,
                                   atol=1e-6, err_msg=x)
