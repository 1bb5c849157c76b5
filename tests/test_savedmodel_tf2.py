"""TF2 SavedModels (tools/gen_savedmodel_fixtures.py tf2): function calls inlined at load time,
resource variables restored by the saver's restore function, outputs equal to what TensorFlow
computed through the same signatures; malformed libraries refused with exit 2."""
import json
import re
import shutil

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgInputError
from tfg.executor.session import Session
from tfg.executor.restore import restore_variables
from tfg.graphdef import io, savedmodel
from tfg.graphdef.functions import CALL_OPS
from tfg.graphdef.object_graph import ObjectNode, pair_nodes

SAVED = FIXTURES / "savedmodel"
MLP = SAVED / "tf2_mlp"
KERAS = SAVED / "tf2_keras"
X = np.load(SAVED / "tf2_feeds.npz")["x"]
EXPECTED = np.load(SAVED / "tf2_expected.npz")
TRAIN = SAVED / "tf2_train"
TRAIN_FEEDS = SAVED / "tf2_train_feeds.npz"
TRAIN_EXPECTED = np.load(SAVED / "tf2_train_expected.npz")


def _run_signature(model, sig, out, feeds):
    g = io.load(str(SAVED / model))
    sess = Session(g)
    restore_variables(sess, g, savedmodel.read_variables(g.saved_model.path))
    bound, tensors, _ = savedmodel.bind_signature(g, sig, feeds, [out])
    return sess.run(tensors, feeds=bound)[0]


def _feeds(model, sig, variant):
    """The signature's feeds for an expected key's variant: `` x, `neg` -x, `iN` x and i=N."""
    inputs = io.load(str(SAVED / model)).saved_model.signatures[sig]["inputs"]
    x_key = next(k for k in inputs if k != "i")
    feeds = {x_key: -X if variant == "neg" else X}
    if variant.startswith("i"):
        feeds["i"] = np.int32(variant[1:])
    return feeds


@pytest.mark.parametrize("key", sorted(EXPECTED.files))
def test_outputs_equal_tensorflow(key):
    model, sig, out = key.split("/")
    out, _, variant = out.partition(":")
    got = _run_signature(model, sig, out, _feeds(model, sig, variant))
    assert got.dtype == EXPECTED[key].dtype and got.shape == EXPECTED[key].shape
    np.testing.assert_allclose(got, EXPECTED[key], rtol=1e-5, atol=1e-6)


def test_control_flow_v2_cond_runs_one_branch():
    g = io.load(str(SAVED / "tf2_cond"))
    assert not g.saved_model.functions["not_inlined"].keys() - {
        n.name for n in g if n.op == "StatefulPartitionedCall"}
    ifs = [n for n in g if n.op == "IdentityN" and n.name + "/switch_pred" in g]
    assert len(ifs) == 1  # the If node kept its name, now fed by Merges
    merges = [g[i] for i in ifs[0].inputs if not i.startswith("^")]
    assert [m.op for m in merges] == ["Merge"]
    # the counter is incremented only by the true branch (sum(x) > 0): 5 restored, and the
    # fixture's x has a negative sum, so +0 for x and +1 for -x
    assert float(X.sum()) < 0
    assert int(EXPECTED["tf2_cond/serving_default/calls"]) == 5
    assert int(EXPECTED["tf2_cond/serving_default/calls:neg"]) == 6


def test_control_flow_v2_case_runs_one_branch():
    g = io.load(str(SAVED / "tf2_case"))
    assert not any(n.op in ("Case", "StatelessCase") for n in g)
    merges = [n for n in g if n.op == "Merge" and n.name.endswith("/merge_0")]
    assert len(merges) == 1 and len(merges[0].data_inputs) == 3  # one input per branch
    # each branch bumps its own counter slot (restored as [10, 20, 30]); index 7 is out of
    # range, so the last branch runs
    for i, hits in ((0, [11, 20, 30]), (1, [10, 21, 30]), (2, [10, 20, 31]), (7, [10, 20, 31])):
        assert EXPECTED[f"tf2_case/serving_default/hits:i{i}"].tolist() == hits


def test_control_flow_v2_while_becomes_a_v1_loop():
    g = io.load(str(SAVED / "tf2_while"))
    ops = [n.op for n in g]
    assert "While" not in ops and "StatelessWhile" not in ops
    assert ops.count("LoopCond") == 1 and ops.count("Enter") == ops.count("Exit") > 2
    frames = {n.get_attr("frame_name") for n in g if n.op == "Enter"}
    assert len(frames) == 1
    # the data-dependent trip count, and the counter restored (10) plus one per iteration
    assert int(EXPECTED["tf2_while/serving_default/iterations"]) == 6
    assert int(EXPECTED["tf2_while/serving_default/steps"]) == 16


def test_load_inlines_every_runnable_call():
    g = io.load(str(MLP))
    info = g.saved_model
    assert sorted(info.signatures) == ["__saved_model_init_op", "classify", "serving_default"]
    # The save function writes files with ops tfg does not know: it alone stays a call.
    calls = [n.name for n in g if n.op in CALL_OPS]
    assert calls == sorted(info.functions["not_inlined"])
    assert len(calls) == 1 and "unknown op" in info.functions["not_inlined"][calls[0]]
    assert info.functions["inlined"] >= 6  # 2 signatures x (wrapper, __call__, 2 x Dense) ...
    assert info.saver["restore_op_name"] in g and g[info.saver["restore_op_name"]].op == \
        "IdentityN"
    # Signature outputs keep their names: the call node became an IdentityN of the results.
    out = info.signatures["serving_default"]["outputs"]["logits"]["name"]
    call = g[out.split(":")[0]]
    assert call.op == "IdentityN" and len(call.get_attr("T")) == 2
    # The bodies are under the call's name; the nested Dense calls are inlined too.
    assert sum(n.op == "MatMul" for n in g if n.name.startswith(call.name + "/")) == 2
    assert g.library is not None and len(g.library.function) >= 6  # kept verbatim


def test_variables_restored_through_the_object_graph_keys():
    values = savedmodel.read_variables(MLP)
    assert "l1/w/.ATTRIBUTES/VARIABLE_VALUE" in values
    graph_proto = values["_CHECKPOINTABLE_OBJECT_GRAPH"]  # a string tensor of the bundle
    assert graph_proto.dtype == object and graph_proto.shape == ()
    assert b"l1" in graph_proto.item() and b"VARIABLE_VALUE" in graph_proto.item()
    g = io.load(str(MLP))
    sess = Session(g)
    restored = restore_variables(sess, g, values)
    assert restored == [f"{layer}/{v}/.ATTRIBUTES/VARIABLE_VALUE" for layer in ("l1", "l2")
                        for v in ("b", "w")]  # the object graph is read, not assigned
    handles = {n.name: n for n in g if n.op == "VarHandleOp"}
    for name in handles:  # every variable now reads its checkpoint value
        value = sess.run(f"{name}/Read/ReadVariableOp:0")
        assert any(np.array_equal(value, v) for k, v in values.items() if k.endswith("VALUE"))


def _assert_train_step(got, step):
    for key, value in got.items():
        want = TRAIN_EXPECTED[f"step{step}/{key}"]
        assert value.dtype == want.dtype and value.shape == want.shape, key
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-7, err_msg=f"{key}@{step}")


def test_keras3_train_step_restores_what_its_functions_capture():
    g = io.load(str(TRAIN))
    values = savedmodel.read_variables(TRAIN)
    keys = sorted(k for k in values if k.endswith("/.ATTRIBUTES/VARIABLE_VALUE"))
    # Keras 3 exports each variable twice: the handle the functions capture, and a copy
    # (`Variable_N`) the saver's restore function assigns. The object graph names the first.
    handles = [n.name for n in g if n.op == "VarHandleOp"]
    assert len(handles) == 2 * len(keys) and sum(h.startswith("Variable") for h in handles) \
        == len(keys)
    captures = g.saved_model.objects.captures
    assert len(captures) == len(keys) and not any(h.startswith("Variable") for h in captures)
    assert any("velocity" in h for h in captures)  # the Adam slots
    sess = Session(g)
    assert restore_variables(sess, g, values) == keys
    bound, tensors, names = savedmodel.bind_signature(g, "train", dict(np.load(TRAIN_FEEDS)), [])
    assert sorted(names) == ["kernel", "loss", "moving_mean", "velocity"]
    for step in (1, 2):  # the updates of step 1 (Adam slots, moving mean) feed step 2
        _assert_train_step(dict(zip(names, sess.run(tensors, feeds=bound))), step)


def test_cli_runs_keras3_train_step(tmp_path):
    out = tmp_path / "out.npz"
    tfg_cli("run", TRAIN, "--signature", "train", "--feeds", TRAIN_FEEDS, "--steps", "2",
            "-o", out)
    got = np.load(out)
    _assert_train_step({k: got[k] for k in got.files}, 2)


def test_object_graphs_pair_by_names_and_slot_references():
    # saved: root {opt: 1, w: 2}; the optimizer's slot m of w is node 3. The checkpoint
    # numbers the same objects differently.
    saved = [ObjectNode(children={"opt": 1, "w": 2}), ObjectNode(slots={(2, "m"): 3}),
             ObjectNode(is_variable=True), ObjectNode(is_variable=True)]
    ckpt = [ObjectNode(children={"w": 1, "opt": 2, "gone": 4}), ObjectNode(),
            ObjectNode(slots={(1, "m"): 3}), ObjectNode(), ObjectNode()]
    assert pair_nodes(saved, ckpt) == {0: 0, 2: 1, 1: 2, 3: 3}


def test_v1_saved_model_with_resource_variables():
    g = io.load(str(SAVED / "v1_resource"))
    assert {g["w"].op, g["v"].op} == {"VarHandleOp", "VariableV2"}
    assert g.saved_model.functions is None  # nothing to inline
    sess = Session(g)
    # its saver's restore op (save/restore_all) restores both kinds
    assert restore_variables(sess, g, savedmodel.read_variables(g.saved_model.path)) \
        == ["v", "w"]


def test_cli_run_by_signature(tmp_path):
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.npz"
    tfg_cli("run", MLP, "--signature", "serving_default", "--feed", f"x=@{tmp_path}/x.npy",
            "-o", out)
    got = np.load(out)
    assert sorted(got.files) == ["logits", "probs"]
    for key in got.files:
        np.testing.assert_allclose(got[key], EXPECTED[f"tf2_mlp/serving_default/{key}"],
                                   rtol=1e-5, atol=1e-6)
    p = tfg_cli("run", MLP, "--signature", "classify", "--feeds", SAVED / "tf2_feeds.npz",
                "--fetch", "classes", "--format", "json")
    assert json.loads(p.stdout)["classes"]["value"] == \
        EXPECTED["tf2_mlp/classify/classes"].tolist()
    p = tfg_cli("run", KERAS, "--signature", "serving_default", "--feed",
                f"keras_tensor=@{tmp_path}/x.npy", "-o", out)
    np.testing.assert_allclose(np.load(out)["output_0"],
                               EXPECTED["tf2_keras/serving_default/output_0"], rtol=1e-5,
                               atol=1e-6)


def test_cli_info_shows_signatures_and_functions():
    out = tfg_cli("info", MLP).stdout.decode()
    assert "saved model: tags serve (variables: yes)" in out
    assert "  serving_default (tensorflow/serving/predict)" in out
    assert "    in  x: serving_default_x:0 float32 [?, 4]" in out
    assert re.search(r"    out probs: StatefulPartitionedCall(_\d+)?:1 float32 \[\?, 3\]", out)
    assert "calls inlined, 1 not" in out and "__inference__traced_save" in out
    js = json.loads(tfg_cli("info", MLP, "--json").stdout)
    assert js["saved_model"]["functions"]["inlined"] >= 6
    assert js["saved_model"]["signatures"]["classify"]["outputs"]["classes"]["dtype"] == "int64"


# --- malformed libraries ---------------------------------------------------------------------

def _mutated(tmp_path, edit):
    """A copy of tf2_mlp whose MetaGraphDef `edit(meta_graph)` changed."""
    dst = tmp_path / "model"
    shutil.copytree(MLP, dst)
    sm = savedmodel.read_saved_model(MLP)
    edit(sm.meta_graphs[0])
    (dst / "saved_model.pb").write_bytes(sm.SerializeToString())
    return dst


def _functions(mg):
    return {f.signature.name: f for f in mg.graph_def.library.function}


def _serving_call(mg):
    """(the main graph's call node of serving_default, the FunctionDef it calls)."""
    name = mg.signature_def["serving_default"].outputs["probs"].name.split(":")[0]
    node = next(n for n in mg.graph_def.node if n.name == name)
    return node, _functions(mg)[node.attr["f"].func.name]


def _run_serving(model):
    return tfg_cli("run", model, "--signature", "serving_default", "--feed",
                   "x=[[1,2,3,4]]", check=False)


def _assert_refused(p, *parts):
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for part in parts:
        assert part in err, err


def test_missing_function_exits_2(tmp_path):
    def edit(mg):
        node, _ = _serving_call(mg)
        node.attr["f"].func.name = "no_such_function"

    p = _run_serving(_mutated(tmp_path, edit))
    _assert_refused(p, "no_such_function", "StatefulPartitionedCall", "does not define")
    # The rest of the model still loads (and info says what is wrong).
    out = tfg_cli("info", tmp_path / "model").stdout.decode()
    assert "no_such_function" in out


def test_recursive_function_exits_2(tmp_path):
    def edit(mg):
        _, wrapper = _serving_call(mg)
        inner = next(n for n in wrapper.node_def if n.op in CALL_OPS)
        inner.attr["f"].func.name = wrapper.signature.name  # the wrapper calls itself

    p = _run_serving(_mutated(tmp_path, edit))
    _assert_refused(p, "recursive function call", "signature 'serving_default' output")


def test_unsupported_ops_in_functions_exit_2(tmp_path):
    def unknown(mg):
        for f in _functions(mg).values():
            for n in f.node_def:
                if n.op == "Relu":
                    n.op = "FancyRelu"

    _assert_refused(_run_serving(_mutated(tmp_path / "a", unknown)), "unknown op 'FancyRelu'",
                    "node 'Relu'", "function '__inference")

    def gradient(mg):  # each traced copy of Dense.__call__
        for f in _functions(mg).values():
            for n in f.node_def:
                if n.op == "AddV2":
                    n.op = "SymbolicGradient"

    _assert_refused(_run_serving(_mutated(tmp_path / "b", gradient)), "symbolic gradient",
                    "node 'add'")


def test_missing_checkpoint_key_exits_2(tmp_path):
    def edit(mg):
        for f in mg.graph_def.library.function:
            for n in f.node_def:
                if n.name == "RestoreV2/tensor_names":
                    t = n.attr["value"].tensor
                    t.string_val[0] = b"nowhere/.ATTRIBUTES/VARIABLE_VALUE"

    p = _run_serving(_mutated(tmp_path, edit))
    _assert_refused(p, "nowhere/.ATTRIBUTES/VARIABLE_VALUE", "does not hold")


def test_corrupt_string_entry_fails_crc(tmp_path):
    dst = tmp_path / "model"
    shutil.copytree(MLP, dst)
    values = savedmodel.read_variables(dst)
    blob = values["_CHECKPOINTABLE_OBJECT_GRAPH"].item()
    shard = next((dst / "variables").glob("variables.data-*"))
    data = shard.read_bytes()
    at = data.index(blob) + len(blob) // 2
    shard.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    with pytest.raises(TfgInputError, match="_CHECKPOINTABLE_OBJECT_GRAPH.*CRC"):
        savedmodel.read_variables(dst)
