"""SavedModels on a two-worker cluster (`tfg run DIR --cluster SPEC`): the variables restored on
the task that holds each one, the init op (tables from an asset file) run there, and the
outputs equal to what TensorFlow computed (the fixtures of test_savedmodel.py,
test_savedmodel_tf2.py and test_text_models.py)."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.restore import load_saved_model_state
from tfg.executor.session import Session
from tfg.graphdef import io, savedmodel

SAVED = FIXTURES / "savedmodel"
TEXT = FIXTURES / "text_models"


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2) as c:
        yield c


def test_v1_variables_restored_on_the_tasks_that_hold_them(cluster):
    g = io.load(str(SAVED / "mlp"))
    sess = Session(g, cluster=cluster.spec)
    try:
        assert load_saved_model_state(sess, g) == ["b1", "b2", "w1", "w2"]
        # the placement spreads them over both workers: each went to its own task
        assert {task for task in sess.backend._owners.values()} == {("worker", 0),
                                                                    ("worker", 1)}
        want = savedmodel.read_variables(g.saved_model.path)
        got = sess.variables()  # collected from both workers
        assert sorted(got) == sorted(want)
        for name, value in got.items():
            np.testing.assert_array_equal(value, want[name])
    finally:
        sess.close()


def test_v1_saved_model_by_signature(cluster, tmp_path):
    expected = np.load(SAVED / "mlp_expected.npz")
    np.save(tmp_path / "x.npy", np.load(SAVED / "mlp_feeds.npz")["x"])
    out = tmp_path / "out.npz"
    tfg_cli("run", SAVED / "mlp", "--signature", "serving_default", "--feed",
            f"x=@{tmp_path}/x.npy", "--cluster", cluster.spec, "-o", out)
    got = np.load(out)
    np.testing.assert_allclose(got["probs"], expected["serving_default/probs"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(got["classes"], expected["serving_default/classes"])


def test_keras3_train_steps_update_the_restored_variables(cluster, tmp_path):
    """Two steps of a Keras 3 training signature: resource variables restored through the
    saver's restore op and the object graph, then updated on the workers by step 1."""
    expected = np.load(SAVED / "tf2_train_expected.npz")
    out = tmp_path / "out.npz"
    tfg_cli("run", SAVED / "tf2_train", "--signature", "train", "--feeds",
            SAVED / "tf2_train_feeds.npz", "--steps", "2", "--cluster", cluster.spec, "-o", out)
    got = np.load(out)
    assert sorted(got.files) == ["kernel", "loss", "moving_mean", "velocity"]
    for key in got.files:
        np.testing.assert_allclose(got[key], expected[f"step2/{key}"], rtol=1e-5, atol=1e-7,
                                   err_msg=key)


@pytest.mark.parametrize("model", ["vocab_file", "tf1_vocab_file", "textvec_int"])
def test_text_model_tables_filled_on_the_cluster(cluster, model, tmp_path):
    """The init op fills the lookup tables on the worker that holds them, from the asset
    file whose path the loader feeds."""
    meta = json.loads((TEXT / "meta.json").read_text())[model]
    expected = np.load(TEXT / "expected.npz")
    out = tmp_path / "out.npz"
    tfg_cli("run", TEXT / model, "--signature", meta["signature"], "--feeds",
            TEXT / f"{model}_feeds.npz", "--cluster", cluster.spec, "-o", out)
    got = np.load(out)
    for key in meta["outputs"]:
        np.testing.assert_allclose(got[key], expected[f"{model}/{key}"], rtol=1e-5, atol=1e-6)
