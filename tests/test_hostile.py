"""Hostile inputs end cleanly (issue 21): text nesting, splat folding, inlining bombs.

Each file comes from tools/gen_hostile.py, made in a temporary folder; each command ends in
one line on stderr with exit 2 (or succeeds without expanding anything) within 10 s of CPU
and under 1 GB of resident memory.
"""
import os

import pytest

from hostile_helpers import assert_bounded, assert_refused, gen_hostile, run_bounded


@pytest.fixture
def made(tmp_path):
    def make(name):
        return getattr(gen_hostile, name)(str(tmp_path))
    return make


def test_text_graph_nested_600_messages_is_refused(made):
    path = made("deep_pbtxt")
    for cmd in (["info", path], ["convert", path, "-o", path + ".pb"]):
        assert_refused(run_bounded(cmd), says="nested 603 deep; at most 99")
    assert not os.path.exists(path + ".pb")


def test_text_graph_too_deep_for_binary_is_refused_not_converted(made, tmp_path):
    """40 levels parse as text, but their .pb would exceed protobuf's 100-level limit: refused
    up front, so convert never writes a file nothing can read back."""
    path = made("deep_convert")
    out = tmp_path / "out.pb"
    assert_refused(run_bounded(["convert", path, "-o", out]), says="at most 99 levels")
    assert not out.exists()


def test_text_nesting_limit_round_trips(tmp_path):
    """The deepest text accepted converts to a .pb that reads back."""
    text = gen_hostile.nested_text(32)  # 99 levels inside the GraphDef
    src, pb = tmp_path / "ok.pbtxt", tmp_path / "ok.pb"
    src.write_text(text)
    assert run_bounded(["convert", src, "-o", pb]).rc == 0
    back = run_bounded(["info", pb])
    assert back.rc == 0, back.stderr


def test_feed_literal_nested_3000_deep_is_refused(made, tmp_path):
    feed = open(made("deep_feed")).read()
    outcome = run_bounded(["run", tmp_path / "placeholder.pb", "--feed", feed, "--fetch", "x"])
    assert_refused(outcome, says="--feed x: value nested 3000 deep")


def test_optimize_does_not_expand_splats(made, tmp_path):
    """16 one-value Consts of 2**27 elements read by foldable ops: nothing is folded (the fold
    would write gigabytes), the output stays small, and memory stays low."""
    path = made("splat_fold")
    out = tmp_path / "opt.pb"
    outcome = run_bounded(["optimize", path, "-o", out])
    assert outcome.rc == 0, outcome.stderr
    assert_bounded(outcome)
    assert out.stat().st_size < 4096


@pytest.mark.parametrize("cmd", [["prune", "--fetch", "y1"], ["place", "--devices", "cpu:2"],
                                 ["partition", "--devices", "cpu:2"], ["info"], ["convert"],
                                 ["run", "--fetch", "y1", "--max-memory", "256M"]],
                         ids=lambda c: c[0])
def test_no_command_decodes_splats_it_only_checks(made, tmp_path, cmd):
    """Validation checks a tensor attr without decoding it (a 2**27-string splat was a 1 GB
    object array and 19 s inside `tfg grad`); run refuses it under --max-memory."""
    path = made("splat_fold")
    args = [cmd[0], path, *cmd[1:]]
    if cmd[0] not in ("run", "info"):
        args += ["-o", tmp_path / "out.pb"]
    outcome = run_bounded(args)
    if cmd[0] == "run":
        assert_refused(outcome, rc=1, says="over the memory limit of 256.00 MiB")
    else:
        assert outcome.rc == 0, outcome.stderr
        assert_bounded(outcome)


@pytest.mark.parametrize("op", sorted(gen_hostile.RANK_SPLATS))
def test_a_vector_of_2_27_entries_is_no_rank(tmp_path, op):
    """tools/fuzz.py --real: a Transpose perm (Tile multiples, Pad paddings) of 2**27 entries
    from one value, on data of unknown rank. The shape function took the result's rank from
    the vector's length: a 2**27-tuple of Nones, 1 GiB and seconds in every command (2**31, as
    the fuzzer made it: `tfg info` hung at 16 GiB). Now no rank above TensorFlow's 254."""
    path = os.path.join(gen_hostile.rank_splats(str(tmp_path)), f"{op}.pb")
    for cmd in (["info", path], ["optimize", path, "-o", tmp_path / "o.pb"]):
        outcome = run_bounded(cmd)
        assert outcome.rc == 0, outcome.stderr
        assert_bounded(outcome)
    # Run on data of rank 2 (2**24 entries: a 64 MiB Const): the kernel refused after writing
    # every entry into its message (2**27: 40 s and 12 GB); now by the vector's length.
    small = os.path.join(gen_hostile.rank_splats(str(tmp_path / "small"), 1 << 24), f"{op}.pb")
    outcome = run_bounded(["run", small, "--feed", "x=[[1.0, 2.0]]", "--fetch", "y"])
    assert_refused(outcome, says=f"node 'y' ({op}): {op} ")
    assert "above TensorFlow's most (254)" in outcome.stderr.decode()
    assert_bounded(outcome)


def test_splat_fold_size_comes_from_the_shape_function():
    """The fold decision reads the Const's declared shape, never its decoded value."""
    from tfg import optimize
    from tfg.graphdef.graph import Graph
    from tfg.schemas.tensors import declared_nbytes
    from tfg.schemas.proto import graph_pb2

    gd = graph_pb2.GraphDef()
    c = gd.node.add(name="c", op="Const")
    c.attr["dtype"].type = 2
    t = c.attr["value"].tensor
    t.dtype = 2
    t.tensor_shape.dim.add().size = 1 << 27
    t.double_val.append(1.0)
    s = gd.node.add(name="s", op="Sum", input=["c", "axis"])
    s.attr["T"].type = 2
    s.attr["Tidx"].type = 3
    a = gd.node.add(name="axis", op="Const")
    a.attr["dtype"].type = 3
    a.attr["value"].tensor.dtype = 3
    a.attr["value"].tensor.int_val.append(0)
    a.attr["value"].tensor.tensor_shape.SetInParent()
    assert declared_nbytes(t) == 1 << 30
    g = optimize(Graph.from_proto(gd), keep=["s"])
    # The sum of a 1 GiB splat is not computed at optimize time: its input is not decoded.
    assert g["s"].op == "Sum" and g["c"].op == "Const"


def test_inlining_bomb_is_refused_before_copying(made):
    path = made("inline_bomb")
    assert_refused(run_bounded(["run", path, "--target", "root"]),
                   says="would add 64.2 GiB to the graph")


@pytest.mark.parametrize("cmd", [["place", "--devices", "cpu:2"],
                                 ["partition", "--devices", "cpu:2"], ["optimize"],
                                 ["run", "--target", "root"]], ids=lambda c: c[0])
def test_inlining_bomb_under_the_byte_cap_is_refused_by_its_amplification(made, tmp_path, cmd):
    """12 levels and a 64 KiB leaf: 268 MiB once inlined, under the 512 MiB cap, from a 66 KB
    file. place and partition wrote all of it (a 270 MB graph, 1.4 GB RSS, ~5 s CPU each: most
    of the CI fuzz round's time); now refused before copying, by the expansion ratio."""
    path = gen_hostile.inline_bomb(str(tmp_path), levels=12, leaf_bytes=1 << 16)
    args = [cmd[0], path, *cmd[1:]] + ([] if cmd[0] == "run" else ["-o", tmp_path / "o.pb"])
    assert_refused(run_bounded(args), says="times the function library's")
    assert not (tmp_path / "o.pb").exists()


def test_a_function_called_a_few_times_still_inlines():
    """The amplification rule leaves a shared function called per layer alone: 8 calls of a
    body holding a 9 MB constant (72 MB inlined, past the floor, 8 times the library)."""
    import numpy as np

    from tfg.graphdef.canonical import canonicalize
    from tfg.graphdef.graph import Graph
    from tfg.schemas.proto import graph_pb2

    gd = graph_pb2.GraphDef()
    f = gd.library.function.add()
    f.signature.name = "layer"
    c = f.node_def.add(name="w", op="Const")
    c.attr["dtype"].type = 1
    c.attr["value"].tensor.dtype = 1
    c.attr["value"].tensor.tensor_shape.dim.add().size = 9 << 18
    c.attr["value"].tensor.tensor_content = np.zeros(9 << 18, np.float32).tobytes()
    for k in range(8):
        gd.node.add(name=f"call{k}", op="layer")
    g = canonicalize(Graph.from_proto(gd))
    assert sum(n.op == "Const" for n in g) == 8


# --- SavedModel bundles -----------------------------------------------------------------------
def _run_model(folder):
    return run_bounded(["run", folder, "--feed", "x=[[0,0,0,0]]", "--fetch", "logits"])


def test_bundle_entries_sharing_one_block_are_refused(made):
    assert_refused(_run_model(made("bundle_one_block")), says="share bytes of shard 0")


def test_bundle_variable_of_another_dtype_is_refused_naming_it(made):
    assert_refused(_run_model(made("bundle_wrong_dtype")),
                   says="variable 'w1' is int64 [16] there, but the graph declares float32 "
                        "[4,8]")


def test_bundle_shard_symlinked_outside_the_model_is_refused(made):
    assert_refused(_run_model(made("bundle_symlink")), says="leads outside")


def test_bundle_entry_size_must_match_its_shape(tmp_path):
    from tfg.errors import TfgInputError
    from tfg.graphdef.savedmodel import read_variables
    from tfg.schemas.crc32c import masked_crc32c

    folder = gen_hostile._mlp_copy(str(tmp_path), "short")
    data = b"\0" * 12
    gen_hostile._bundle(folder, {"w1": (1, [4, 8], 0, 12, masked_crc32c(data)), b"": data})
    with pytest.raises(TfgInputError, match="'w1' holds 12 bytes, but float32 \\[4,8\\] takes "
                                            "128"):
        read_variables(folder)


# --- one memory rule for every kernel ---------------------------------------------------------
@pytest.mark.parametrize("op", sorted(gen_hostile.ALLOCATORS))
def test_kernel_allocation_is_checked_from_its_shape_function(op, tmp_path):
    """Each of these once asked numpy for 64-512 GiB past --max-memory; the op's shape function
    on the actual inputs now refuses it first (exit 1: a valid graph failing while running)."""
    folder = gen_hostile.allocators(str(tmp_path))
    outcome = run_bounded(["run", os.path.join(folder, f"{op}.pbtxt"), "--fetch", "y",
                           "--max-memory", "1G"])
    assert_refused(outcome, rc=1, says=f"node 'y' ({op}) failed: would allocate")
    assert "over the memory limit of 1.00 GiB" in outcome.stderr.decode()


def test_default_limit_is_a_share_of_available_memory(tmp_path):
    from tfg.executor import limits

    assert limits.resolve_limit(None) == int(limits.available_memory() * 0.8)
    folder = gen_hostile.allocators(str(tmp_path))
    # 512 GiB: over 80% of what any test machine has available, with no --max-memory given.
    outcome = run_bounded(["run", os.path.join(folder, "DynamicStitch.pbtxt"), "--fetch", "y"])
    assert_refused(outcome, rc=1, says="would allocate 512.00 GiB")


def test_allocating_kernels_still_run_under_the_limit(tmp_path):
    import numpy as np

    from tfg import Session
    from tfg.graphdef.io import loads

    text = (gen_hostile._const_text("dims", "DT_INT32", [5])
            + gen_hostile._const_text("one", "DT_FLOAT", [1], [])
            + gen_hostile._op_text("x", "Fill", ["dims", "one"], T=gen_hostile._F)
            + gen_hostile._op_text("y", "Pack", ["x"] * 3, N="i: 3", T=gen_hostile._F))
    y = Session(loads(text.encode()), max_memory="1M").run("y")
    assert y.shape == (3, 5) and np.all(y == 1)


def test_json_output_of_string_tensors(tmp_path):
    """A 1-D and a 2-D string tensor print as JSON (the 1-D one raised AttributeError)."""
    import json

    text = ('node { name: "s" op: "Const" attr { key: "dtype" value { type: DT_STRING } } '
            'attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 2 '
            '} } string_val: "a" string_val: "\\377" } } } }\n'
            'node { name: "m" op: "Reshape" input: "s" input: "shape" attr { key: "T" value { '
            'type: DT_STRING } } attr { key: "Tshape" value { type: DT_INT32 } } }\n'
            + gen_hostile._const_text("shape", "DT_INT32", [1, 2]))
    path = tmp_path / "strings.pbtxt"
    path.write_text(text)
    outcome = run_bounded(["run", path, "--fetch", "s", "--fetch", "m", "--format", "json"])
    assert outcome.rc == 0, outcome.stderr
    doc = json.loads(outcome.stdout)
    assert doc["s"] == {"dtype": "string", "shape": [2], "value": ["a", "\\xff"]}
    assert doc["m"]["value"] == [["a", "\\xff"]]
