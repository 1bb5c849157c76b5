"""Text models that TensorFlow made (tools/gen_text_model_fixtures.py) run in tfg as in
TensorFlow: Keras 3 SavedModels whose graphs lower, strip, split and n-gram strings, look the
words up in hash tables their init op fills, hash strings into buckets and pad ragged rows;
and a frozen TF1 graph of feature columns whose tables `init_all_tables` fills.

Each goes through the CLI the way a user runs it (`tfg run DIR --signature serving_default`,
`tfg run graph.pb --init init_all_tables`, also through optimize | partition and on a
two-worker cluster), and the outputs are compared with TensorFlow's."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgInputError
from tfg.executor.distributed.local import LocalCluster
from tfg.graphdef import savedmodel
from tfg.schemas.proto import saved_model_pb2

TEXT = FIXTURES / "text_models"
META = json.loads((TEXT / "meta.json").read_text())
EXPECTED = np.load(TEXT / "expected.npz")


@pytest.mark.parametrize("model", sorted(META))
def test_saved_model_matches_tensorflow(model, tmp_path):
    out = tmp_path / "out.npz"
    tfg_cli("run", TEXT / model, "--signature", META[model]["signature"],
            "--feeds", TEXT / f"{model}_feeds.npz", "-o", out)
    got = np.load(out)
    for key in META[model]["outputs"]:
        want = EXPECTED[f"{model}/{key}"]
        assert got[key].shape == want.shape and got[key].dtype == want.dtype
        np.testing.assert_allclose(got[key], want, rtol=1e-5, atol=1e-6)


def test_feature_columns_after_init_all_tables(tmp_path):
    out = tmp_path / "out.npz"
    tfg_cli("run", TEXT / "feature_columns.pb", "--init", "init_all_tables",
            "--feeds", TEXT / "feature_columns_feeds.npz", "--fetch", "out", "-o", out)
    np.testing.assert_allclose(np.load(out)["out"], EXPECTED["feature_columns/out"],
                               rtol=1e-5, atol=1e-6)


def test_feature_columns_without_init_names_the_table(tmp_path):
    p = tfg_cli("run", TEXT / "feature_columns.pb", "--feeds",
                TEXT / "feature_columns_feeds.npz", "--fetch", "out", check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and len(err.strip().splitlines()) == 1, err
    assert "not initialized" in err.lower() and "Traceback" not in err


def test_a_text_model_after_optimize_and_partition(tmp_path):
    """The pipe a user writes: the frozen feature-column graph through optimize (tables and
    their initializer kept) and a two-device partition, then run."""
    graph = TEXT / "feature_columns.pb"
    opt = tfg_cli("optimize", graph, "--keep", "out,init_all_tables").stdout
    part = tfg_cli("partition", "-", "--devices", "cpu:2", input=opt).stdout
    out = tmp_path / "out.npz"
    tfg_cli("run", "-", "--devices", "cpu:2", "--init", "init_all_tables", "--feeds",
            TEXT / "feature_columns_feeds.npz", "--fetch", "out", "-o", out, input=part)
    np.testing.assert_allclose(np.load(out)["out"], EXPECTED["feature_columns/out"],
                               rtol=1e-5, atol=1e-6)


def test_feature_columns_on_a_two_worker_cluster(tmp_path):
    """The tables live on the workers; `--init init_all_tables` fills them there."""
    out = tmp_path / "out.npz"
    with LocalCluster(2) as cluster:
        tfg_cli("run", TEXT / "feature_columns.pb", "--cluster", cluster.spec, "--init",
                "init_all_tables", "--feeds", TEXT / "feature_columns_feeds.npz", "--fetch",
                "out", "-o", out)
    np.testing.assert_allclose(np.load(out)["out"], EXPECTED["feature_columns/out"],
                               rtol=1e-5, atol=1e-5)


def test_numbers_fed_as_text_are_refused(tmp_path):
    """An int64 array fed to a string placeholder: TensorFlow refuses it; tfg used to turn the
    numbers into their decimal text (every lookup then missed)."""
    feeds = tmp_path / "f.npz"
    values = dict(np.load(TEXT / "feature_columns_feeds.npz"))
    values["word"] = np.arange(5)
    np.savez(feeds, **values)
    p = tfg_cli("run", TEXT / "feature_columns.pb", "--init", "init_all_tables",
                "--feeds", feeds, "--fetch", "out", check=False)
    assert p.returncode == 2 and "expected string" in p.stderr.decode(), p.stderr.decode()


@pytest.mark.parametrize("filename", ["../../../etc/passwd", "/etc/passwd", ""])
def test_an_asset_outside_the_assets_folder_is_refused(filename):
    mg = saved_model_pb2.MetaGraphDef()
    asset = mg.asset_file_def.add()
    asset.tensor_info.name = "vocab/Const:0"
    asset.filename = filename
    with pytest.raises(TfgInputError, match="assets/ folder"):
        savedmodel.asset_files(mg, "export/1")


def test_assets_are_fed_their_path_under_assets(tmp_path):
    """The TF1 builder lists its assets in the "saved_model_assets" collection; the tensor is
    fed the copy under assets/ (the path it was exported with no longer exists)."""
    g = savedmodel.load_graph(str(TEXT / "tf1_vocab_file"))
    ((name, path),) = g.saved_model.assets.items()
    assert path == str((TEXT / "tf1_vocab_file" / "assets" / "tf1_vocab.txt").resolve())
    assert g.saved_model.init_ops and all(n in g for n in g.saved_model.init_ops)


def test_info_names_the_init_op_and_its_assets():
    out = tfg_cli("info", TEXT / "tf1_vocab_file").stdout.decode()
    assert "init op: init_all_tables" in out and "(assets: tf1_vocab.txt)" in out, out
    info = json.loads(tfg_cli("info", TEXT / "tf1_vocab_file", "--json").stdout)
    assert list(info["saved_model"]["assets"].values()) == ["tf1_vocab.txt"]
