"""`tfg run` on a plain GraphDef whose nodes call functions of its library (a TF2 concrete
function's graph: PartitionedCall + StatelessIf), inlined on load; values from TensorFlow
(tools/gen_function_fixtures.py)."""
from pathlib import Path

import numpy as np
import pytest

from helpers import tfg_cli

HERE = Path(__file__).parent / "fixtures" / "functions"


@pytest.mark.parametrize("k", [0, 1])  # 0 takes the cond's then branch, 1 its else branch
def test_run_inlines_calls_of_a_plain_graph(tmp_path, k):
    expected = np.load(HERE / "expected.npz")
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=expected[f"x_{k}"])
    out = tmp_path / "out.npz"
    tfg_cli("run", HERE / "fn_graph.pb", "--feeds", feeds, "--fetch", "Identity:0", "-o", out)
    np.testing.assert_allclose(np.load(out)["Identity:0"], expected[f"y_{k}"], rtol=1e-6)


def test_a_call_of_a_missing_function_is_an_input_error(tmp_path):
    from tfg.schemas.proto import graph_pb2

    gd = graph_pb2.GraphDef.FromString((HERE / "fn_graph.pb").read_bytes())
    del gd.library.function[:]
    bad = tmp_path / "bad.pb"
    bad.write_bytes(gd.SerializeToString())
    p = tfg_cli("run", bad, "--feed", "x=0", "--fetch", "Identity:0", check=False)
    assert p.returncode == 2, p.stderr
    err = p.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and "PartitionedCall" in err, err
