"""SavedModel input (a v1 SavedModel TensorFlow's Builder wrote, tools/gen_savedmodel_fixtures.py):
MetaGraphDef selection by tags, signatures, the tensor-bundle variables, `tfg info` and
`tfg run --signature` against what TensorFlow computed; frozen graphs; `tfg run --format`."""
import json
import shutil

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgInputError
from tfg.executor.restore import restore_variables
from tfg.graphdef import io, savedmodel
from tfg.schemas.proto import saved_model_pb2

SAVED = FIXTURES / "savedmodel"
MODEL = SAVED / "mlp"
FEEDS = np.load(SAVED / "mlp_feeds.npz")
EXPECTED = np.load(SAVED / "mlp_expected.npz")


def test_load_folder_file_and_signatures():
    for path in (MODEL, MODEL / "saved_model.pb"):
        g = io.load(str(path))
        assert "probs" in g and g["w1"].op == "VariableV2"
        info = g.saved_model
        assert info.tags == ["serve"]
        assert sorted(info.signatures) == ["logits", "serving_default"]
        sig = info.signatures["serving_default"]
        assert sig["method"] == "tensorflow/serving/predict"
        assert sig["inputs"] == {"x": {"name": "x:0", "dtype": "float32", "shape": [None, 4]}}
        assert sig["outputs"]["classes"] == {"name": "classes:0", "dtype": "int64",
                                             "shape": [None]}
        assert info.variables_prefix.endswith("variables/variables")


def test_tag_selection(tmp_path):
    sm = savedmodel.read_saved_model(MODEL)
    extra = sm.meta_graphs.add()
    extra.CopyFrom(sm.meta_graphs[0])
    del extra.meta_info_def.tags[:]
    extra.meta_info_def.tags.extend(["train", "gpu"])
    (tmp_path / "saved_model.pb").write_bytes(sm.SerializeToString())
    assert io.load(str(tmp_path)).saved_model.tags == ["serve"]  # default: serve
    g = savedmodel.load_graph(tmp_path, tags="gpu,train")
    assert g.saved_model.tags == ["gpu", "train"]
    assert g.saved_model.available_tags == [["serve"], ["gpu", "train"]]
    with pytest.raises(TfgInputError, match="no MetaGraphDef with tags eval"):
        savedmodel.load_graph(tmp_path, tags="eval")
    del sm.meta_graphs[0]
    sm.meta_graphs.add().CopyFrom(extra)
    (tmp_path / "saved_model.pb").write_bytes(sm.SerializeToString())
    with pytest.raises(TfgInputError, match="pick one with --tag"):
        io.load(str(tmp_path))


def test_meta_file_and_text_form(tmp_path):
    sm = savedmodel.read_saved_model(MODEL)
    (tmp_path / "model.meta").write_bytes(sm.meta_graphs[0].SerializeToString())
    assert len(io.load(str(tmp_path / "model.meta"))) == len(io.load(str(MODEL)))
    from google.protobuf import text_format

    (tmp_path / "saved_model.pbtxt").write_text(text_format.MessageToString(sm))
    assert io.load(str(tmp_path)).saved_model.signatures.keys() == {"logits",
                                                                    "serving_default"}


def test_bad_saved_models(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(b"\xff\xff\xff")
    with pytest.raises(TfgInputError, match="not a SavedModel"):
        io.load(str(tmp_path))
    (tmp_path / "saved_model.pb").write_bytes(saved_model_pb2.SavedModel(
        saved_model_schema_version=1).SerializeToString())
    with pytest.raises(TfgInputError, match="without any MetaGraphDef"):
        io.load(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TfgInputError, match="(?i)is a directory"):
        io.load(str(empty))


def test_read_variables_and_crc(tmp_path):
    values = savedmodel.read_variables(MODEL)
    assert {k: v.shape for k, v in values.items()} == {"w1": (4, 8), "b1": (8,),
                                                        "w2": (8, 3), "b2": (3,)}
    assert all(v.dtype == np.float32 for v in values.values())
    copy = tmp_path / "m"
    shutil.copytree(MODEL, copy)
    data = copy / "variables" / "variables.data-00000-of-00001"
    blob = bytearray(data.read_bytes())
    blob[5] ^= 0x10
    data.write_bytes(bytes(blob))
    with pytest.raises(TfgInputError, match="fails its CRC check"):
        savedmodel.read_variables(copy)
    index = copy / "variables" / "variables.index"
    index.write_bytes(index.read_bytes()[:-1] + b"\x00")
    with pytest.raises(TfgInputError, match="bad magic"):
        savedmodel.read_variables(copy)


def test_session_with_restored_variables():
    from tfg.executor.session import Session

    g = io.load(str(MODEL))
    sess = Session(g)
    restored = restore_variables(sess, g, savedmodel.read_variables(MODEL))
    assert restored == ["b1", "b2", "w1", "w2"]
    probs, logits = sess.run(["probs:0", "logits:0"], feeds={"x:0": FEEDS["x"]})
    np.testing.assert_allclose(probs, EXPECTED["serving_default/probs"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, EXPECTED["logits/logits"], rtol=1e-5, atol=1e-5)


def test_cli_info_shows_signatures():
    out = tfg_cli("info", MODEL).stdout.decode()
    assert "saved model: tags serve (variables: yes)" in out
    assert "  serving_default (tensorflow/serving/predict)" in out
    assert "    in  x: x:0 float32 [?, 4]" in out
    assert "    out probs: probs:0 float32 [?, 3]" in out
    line = f"tfg run {MODEL} --signature serving_default --random-feeds"
    assert out.rstrip().endswith(line)
    assert "save/filename" not in out  # the signatures, not the saver's internal inputs
    got = json.loads(tfg_cli(*line.split()[1:], "--json").stdout)  # the line runs as printed
    assert got["probs"]["shape"] == [1, 3] and got["classes"]["dtype"] == "int64"
    js = json.loads(tfg_cli("info", MODEL, "--json").stdout)
    assert js["saved_model"]["signatures"]["logits"]["outputs"]["logits"]["name"] == "logits:0"
    assert {"signature": "serving_default", "name": "x", "tensor": "x:0", "dtype": "float32",
            "shape": [None, 4]} in js["inputs"]
    assert {(o["signature"], o["name"]) for o in js["outputs"]} == {
        ("logits", "logits"), ("serving_default", "classes"), ("serving_default", "probs")}
    p = tfg_cli("info", MODEL, "--tag", "train", check=False)
    assert p.returncode == 2 and b"no MetaGraphDef with tags train" in p.stderr


def test_cli_run_by_signature(tmp_path):
    np.save(tmp_path / "x.npy", FEEDS["x"])
    out = tmp_path / "out.npz"
    tfg_cli("run", MODEL, "--signature", "serving_default", "--feed", f"x=@{tmp_path}/x.npy",
            "-o", out)
    got = np.load(out)
    assert sorted(got.files) == ["classes", "probs"]
    np.testing.assert_allclose(got["probs"], EXPECTED["serving_default/probs"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(got["classes"], EXPECTED["serving_default/classes"])
    # --feeds keyed by signature input names, one output fetched by key, JSON output
    p = tfg_cli("run", MODEL, "--signature", "logits", "--feeds", SAVED / "mlp_feeds.npz",
                "--fetch", "logits", "--format", "json")
    js = json.loads(p.stdout)
    np.testing.assert_allclose(np.array(js["logits"]["value"]), EXPECTED["logits/logits"],
                               rtol=1e-5, atol=1e-5)
    assert js["logits"]["dtype"] == "float32" and js["logits"]["shape"] == [5, 3]
    bad = tfg_cli("run", MODEL, "--signature", "nope", "--feed", "x=[[0,0,0,0]]", check=False)
    assert bad.returncode == 2 and b"no signature 'nope'" in bad.stderr
    bad = tfg_cli("run", MODEL, "--signature", "logits", "--fetch", "probz",
                  "--feed", "x=[[0,0,0,0]]", check=False)
    assert bad.returncode == 2


def test_cli_run_frozen_graph_and_formats(tmp_path):
    frozen = SAVED / "frozen.pb"
    np.save(tmp_path / "x.npy", FEEDS["x"])
    feed = f"x=@{tmp_path}/x.npy"
    text = tfg_cli("run", frozen, "--feed", feed, "--fetch", "probs").stdout.decode()
    assert text.startswith("probs = array([[")
    p = tfg_cli("run", frozen, "--feed", feed, "--fetch", "probs", "--format", "npz")
    (tmp_path / "o.npz").write_bytes(p.stdout)
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["probs"],
                               np.load(SAVED / "frozen_expected.npz")["probs:0"], rtol=1e-5,
                               atol=1e-6)
    tfg_cli("run", frozen, "--feed", feed, "--fetch", "probs", "-o", tmp_path / "o.json")
    js = json.loads((tmp_path / "o.json").read_text())
    assert js["probs"]["shape"] == [5, 3]
