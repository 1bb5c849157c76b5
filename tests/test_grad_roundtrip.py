"""`tfg grad` output runs in TensorFlow with the same values (tests/fixtures/grad_roundtrip,
made by tools/gen_grad_roundtrip.py: tfg's gradient graphs of the conformance mlp, cond and
while cases, imported with tf.import_graph_def and run by TensorFlow). Here tfg runs the very
same graphs and must agree with TensorFlow's values."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from tfg.executor.session import Session
from tfg.graphdef import io

DIR = FIXTURES / "grad_roundtrip"
INDEX = json.loads((DIR / "cases.json").read_text())


@pytest.mark.parametrize("name", sorted(INDEX))
def test_tfg_matches_tensorflow_on_tfg_graph(name):
    case = INDEX[name]
    g = io.load(str(DIR / f"{name}.pb"))
    feeds = dict(np.load(DIR / f"{name}.feeds.npz"))
    want = np.load(DIR / f"{name}.tf.npz")
    got = Session(g).run(case["fetches"], feeds)
    for fetch, value in zip(case["fetches"], got):
        np.testing.assert_allclose(value, want[fetch], rtol=case["rtol"], atol=case["atol"])

