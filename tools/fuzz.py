#!/usr/bin/env python3
"""A mutation fuzzer for the tfg CLI: malformed graphs through every subcommand.

    python3 tools/fuzz.py                      # full size: every seed x mutator x 8 rounds
    python3 tools/fuzz.py --rounds 2 --seed 7  # smaller, another random stream
    python3 tools/fuzz.py --processes          # each command as its own process (slower;
                                               # also catches crashes of the interpreter)
    python3 tools/fuzz.py --partitioned --only run   # the seeds partitioned over cpu:3 too
    python3 tools/fuzz.py --rounds 0 --bundle-rounds 8  # SavedModel bundles only
    python3 tools/fuzz.py --real --seeds real_loops/ --rounds 2   # real models, see below

Seeds are the shared conformance graphs (../shared/conformance, when present) and the
project's executor/partition fixtures. Each round takes a seed, applies one to three mutations
(flipped bits, truncation, wrong attr types, huge declared shapes, negative dims, out-of-range
ports, self-loops, Switch without predicate, Merge of mismatched dtypes, Exit without Enter,
loops without LoopCond, ...) and runs info, convert, render, grad, optimize, prune, place,
partition and run on the result. Every command must end with exit 0, exit 2 (bad input) or
exit 1 (a runtime failure of `run`) with ONE line on stderr and no traceback, leave no output
file when it failed, and finish within the time bound. The report gives the inputs tried per
subcommand and every failure with the seed, the mutations and the command to reproduce it.
A `run` past the time bound is cancelled and listed apart (with its reproducer), not counted
as a failure: a mutant may loop for ever legitimately (a counter that no longer advances, a
loop bound made 2**20); checked by hand so far, each one was a loop still iterating, not a
step waiting on a message that never comes (the executor reports those as deadlocks).

`--real` adds the real models as seeds (tests/fixtures/real_models, real_loops,
real_models_hub: CNNs, RNNs, v1 and functional loops with TensorArrays and TensorLists, beam
search, transformers; the Keras text models as bundles) and the mutators aimed at them
(REAL: a While/If whose cond/body function is missing, recursive, of the wrong arity or types;
a cycle of PartitionedCalls; TensorList/TensorArray dtype, element shape and size attrs that
contradict the data; lookup tables of the wrong key dtype; string tensors of huge declared
shapes; a loop bound made 2**31; Enter frames with inconsistent names or parallel_iterations
0 or negative). One round over all of them takes ~20 minutes; a mutant its mutators could
not change (a loop mutator on a CNN) is not run again.

SavedModel folders are fuzzed too (tools/fuzz_bundle.py: index entries, header, shard and
index bytes, saved_model.pb; through info, convert and run). No TensorFlow needed.
tests/test_fuzz_cli.py runs this engine at a bounded size in CI (TFG_FUZZ_FULL=1 runs it at
full size; each REAL mutator once on a small real model).
"""
import argparse
import collections
import io as pyio
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tfg.schemas.proto import attr_value_pb2, graph_pb2  # noqa: E402

CONFORMANCE = pathlib.Path(os.environ.get("TFG_CONFORMANCE",
                                          ROOT.parent / "shared" / "conformance"))
SUBCOMMANDS = ("info", "convert", "render", "grad", "optimize", "prune", "place", "partition",
               "run")
REAL_AREAS = ("real_models", "real_loops", "real_models_hub")  # tests/fixtures/*, --real
TIME_BOUND_S = 30.0  # per command; a run that loops longer is cancelled and reported
RUN_MAX_MEMORY = "256M"
# A command cancelled at the time bound that used less CPU than this share of the time was
# waiting, not computing: "stuck" (a deadlock: a Merge or a Recv waiting for ever), a failure;
# one that computed all along is "hang" (a loop that never ends), which `run` may do.
STUCK_CPU_SHARE = 0.05


# --- seeds ----------------------------------------------------------------------------------
class Seed:
    def __init__(self, name, folder):
        self.name = name
        self.data = (folder / "graph.pb").read_bytes()
        case = json.loads((folder / "case.json").read_text())
        self.feeds = folder / "feeds.npz" if (folder / "feeds.npz").exists() else None
        self.fetches = case.get("fetches") or case.get("ys") or []
        self.targets = case.get("targets") or []
        self.init = case.get("init") or []
        self.ys = (case.get("ys") or self.fetches)[:1]
        self.xs = case.get("xs") or case.get("feeds") or []
        self.devices = None  # `tfg run --devices` (a partitioned seed names its devices)

    def __repr__(self):
        return f"Seed({self.name})"


def load_seeds(real=False):
    """Conformance cases (when ../shared/conformance exists) and the project's fixtures; with
    `real`, the real models too (REAL_AREAS: TF-exported CNNs, RNNs, v1 and functional loops,
    beam search, transformers)."""
    folders = []
    if CONFORMANCE.is_dir():
        folders += [("conformance/" + p.name, p) for p in sorted(CONFORMANCE.iterdir())
                    if (p / "case.json").exists() and (p / "graph.pb").exists()]
    for area in ("executor", "partition") + (REAL_AREAS if real else ()):
        base = ROOT / "tests" / "fixtures" / area
        if base.is_dir():
            folders += [(f"{area}/{p.name}", p) for p in sorted(base.iterdir())
                        if (p / "case.json").exists() and (p / "graph.pb").exists()]
    return [Seed(name, p) for name, p in folders]


def partitioned_seeds(seeds, devices="cpu:3"):
    """Each seed as `tfg partition --devices DEVICES` writes it (seeds that do not partition
    are left out): mutants of these hit _Send/_Recv pairs and the per-device control loops of
    a split while loop, where a lost message could leave a step waiting forever."""
    import copy

    from tfg.graphdef import io
    from tfg.passes.partition import partition

    out = []
    for seed in seeds:
        try:
            graph = partition(io.loads(seed.data), devices, warn=lambda *a, **k: None)
        except Exception:  # noqa: BLE001 - a seed tfg cannot partition is no seed here
            continue
        clone = copy.copy(seed)
        clone.name = "partitioned/" + seed.name
        clone.data = io.dumps(graph)
        clone.devices = devices
        out.append(clone)
    return out


# --- mutations: each takes (GraphDef, Random) and returns a description, or None ----------
def _pick(rng, nodes, pred=lambda n: True):
    cands = [n for n in nodes if pred(n)]
    return rng.choice(cands) if cands else None


def _attr_of_kind(rng, kind):
    av = attr_value_pb2.AttrValue()
    if kind == "s":
        av.s = rng.choice([b"", b"\x00\xff", b"x" * 10000, b"$(rm -rf /)", b"__import__('os')"])
    elif kind == "i":
        av.i = rng.choice([-1, -(1 << 62), 1 << 62, 0])
    elif kind == "f":
        av.f = rng.choice([float("nan"), float("inf"), -0.0, 1e300])
    elif kind == "b":
        av.b = True
    elif kind == "type":
        av.type = rng.choice([0, 7, 20, 21, 999, 101])
    elif kind == "shape":
        av.shape.dim.add().size = rng.choice([-7, 1 << 40, 0])
    elif kind == "tensor":
        av.tensor.dtype = 3
        av.tensor.tensor_shape.dim.add().size = 2
        av.tensor.int_val.extend([1, 2])
    elif kind == "list":
        av.list.i.extend([1, -2, 1 << 40])
    elif kind == "func":
        av.func.name = "no_such_function"
    return av


def m_wrong_attr_type(gd, rng):
    node = _pick(rng, gd.node, lambda n: len(n.attr) > 0)
    if node is None:
        return None
    key = rng.choice(sorted(node.attr))
    kinds = [k for k in ("s", "i", "f", "b", "type", "shape", "tensor", "list", "func")
             if node.attr[key].WhichOneof("value") != k]
    kind = rng.choice(kinds)
    node.attr[key].CopyFrom(_attr_of_kind(rng, kind))
    return f"attr {node.name}.{key} -> {kind}"


def m_huge_shape(gd, rng):
    choice = rng.randrange(3)
    if choice == 0:
        node = _pick(rng, gd.node, lambda n: n.op == "Const")
        if node is None:
            return None
        t = node.attr["value"].tensor
        t.ClearField("tensor_content")
        t.tensor_shape.ClearField("dim")
        for d in rng.choice([[1 << 20, 1 << 20], [1 << 40], [1 << 31], [1 << 62, 1 << 62]]):
            t.tensor_shape.dim.add().size = d
        return f"Const {node.name} declares a huge shape"
    if choice == 1:  # a shape-like int vector asking for a 1 TB tensor
        node = _pick(rng, gd.node, lambda n: n.op == "Const" and
                     n.attr["value"].tensor.dtype in (3, 9))
        if node is None:
            return None
        t = node.attr["value"].tensor
        n = max(1, len(t.tensor_shape.dim) and t.tensor_shape.dim[0].size or 1)
        n = min(n, 4)
        t.ClearField("tensor_content")
        t.ClearField("int_val")
        t.ClearField("int64_val")
        t.tensor_shape.ClearField("dim")
        t.tensor_shape.dim.add().size = n
        vals = [1 << 20] * n
        (t.int_val if t.dtype == 3 else t.int64_val).extend(vals)
        return f"Const {node.name} holds huge dims {vals}"
    node = _pick(rng, gd.node, lambda n: "shape" in n.attr)
    if node is None:
        return None
    node.attr["shape"].shape.ClearField("dim")
    node.attr["shape"].shape.dim.add().size = 1 << 50
    return f"{node.name}.shape = [2**50]"


def m_negative_dims(gd, rng):
    node = _pick(rng, gd.node, lambda n: n.op == "Const" or "shape" in n.attr)
    if node is None:
        return None
    if node.op == "Const":
        t = node.attr["value"].tensor
        if t.dtype in (3, 9) and rng.random() < 0.5:  # a negative value in a shape-like vector
            t.ClearField("tensor_content")
            t.ClearField("int_val")
            t.ClearField("int64_val")
            t.tensor_shape.ClearField("dim")
            t.tensor_shape.dim.add().size = 2
            (t.int_val if t.dtype == 3 else t.int64_val).extend([-3, 2])
            return f"Const {node.name} = [-3, 2]"
        t.tensor_shape.dim.add().size = -5
        return f"Const {node.name} declares dim -5"
    node.attr["shape"].shape.dim.add().size = -9
    return f"{node.name}.shape gets dim -9"


def m_bad_port(gd, rng):
    node = _pick(rng, gd.node, lambda n: any(not i.startswith("^") for i in n.input))
    if node is None:
        return None
    idx = rng.choice([i for i, s in enumerate(node.input) if not s.startswith("^")])
    src = node.input[idx].split(":")[0]
    port = rng.choice([1, 7, 1 << 31, 1 << 70, -2])
    node.input[idx] = f"{src}:{port}"
    return f"{node.name} input {idx} -> {src}:{port}"


def m_self_loop(gd, rng):
    node = _pick(rng, gd.node)
    if node is None:
        return None
    if node.input and rng.random() < 0.5:
        node.input[0] = node.name
    else:
        node.input.append(rng.choice([node.name, "^" + node.name]))
    return f"self-loop on {node.name}"


def m_switch_without_pred(gd, rng):
    node = _pick(rng, gd.node, lambda n: n.op in ("Switch", "RefSwitch") and len(n.input) > 1)
    if node is not None:
        del node.input[1]
        return f"Switch {node.name} loses its predicate"
    src = _pick(rng, gd.node)
    if src is None:
        return None
    sw = gd.node.add(name="fuzz_switch", op="Switch", input=[src.name])
    sw.attr["T"].type = 1
    gd.node.add(name="fuzz_switch_out", op="Identity", input=["fuzz_switch:1"]).attr[
        "T"].type = 1
    return "a Switch with one input"


def _const(gd, name, dtype, value):
    nd = gd.node.add(name=name, op="Const")
    nd.attr["dtype"].type = dtype
    t = nd.attr["value"].tensor
    t.dtype = dtype
    (t.int_val if dtype == 3 else t.float_val).append(value)
    return nd


def m_merge_mismatch(gd, rng):
    bad = _const(gd, "fuzz_int_const", 3, 1).name
    node = _pick(rng, gd.node, lambda n: n.op in ("Merge", "RefMerge") and len(n.input) > 1)
    if node is not None:
        node.input[rng.randrange(2)] = bad
        return f"Merge {node.name} gets an int32 input"
    _const(gd, "fuzz_float_const", 1, 1.0)
    m = gd.node.add(name="fuzz_merge", op="Merge", input=["fuzz_float_const", bad])
    m.attr["T"].type = 1
    m.attr["N"].i = 2
    return "a Merge of float and int32"


def m_exit_without_enter(gd, rng):
    enter = _pick(rng, gd.node, lambda n: n.op in ("Enter", "RefEnter") and n.input
                  and not n.input[0].startswith("^"))  # an earlier mutation may have cut it
    if enter is not None and rng.random() < 0.5:  # bypass an Enter: its frame loses an input
        for n in gd.node:
            for i, s in enumerate(n.input):
                if s == enter.name or s == enter.name + ":0":
                    n.input[i] = enter.input[0]
        return f"Enter {enter.name} bypassed"
    src = _pick(rng, gd.node, lambda n: n.op not in ("NoOp",) and not n.op.startswith("_"))
    if src is None:
        return None
    ex = gd.node.add(name="fuzz_exit", op="Exit", input=[src.name])
    ex.attr["T"].type = 1
    gd.node.add(name="fuzz_exit_out", op="Identity", input=["fuzz_exit"]).attr["T"].type = 1
    return f"an Exit of {src.name} without an Enter"


def m_no_loopcond(gd, rng):
    conds = [n for n in gd.node if n.op == "LoopCond"]
    if not conds:
        return None
    how = rng.choice(["identity", "bypass"])
    for c in conds:
        if how == "bypass" and not c.input:  # an earlier mutation left it without an input
            continue
        if how == "identity":
            c.op = "Identity"
            c.attr["T"].type = 10
        else:
            for n in gd.node:
                for i, s in enumerate(n.input):
                    if s.split(":")[0] == c.name and not s.startswith("^"):
                        n.input[i] = c.input[0]
    return f"{len(conds)} LoopCond -> {how}"


def m_dangling(gd, rng):
    node = _pick(rng, gd.node)
    if node is None:
        return None
    node.input.append(rng.choice(["nope", "nope:3", "^nope", ":", "^", "", "a:b:c"]))
    return f"{node.name} gets a dangling input"


def m_duplicate(gd, rng):
    node = _pick(rng, gd.node)
    if node is None:
        return None
    gd.node.add().CopyFrom(node)
    return f"{node.name} duplicated"


def m_cycle(gd, rng):
    a, b = _pick(rng, gd.node), _pick(rng, gd.node)
    if a is None or a is b:
        return None
    a.input.append(b.name)
    b.input.append(a.name)
    return f"cycle {a.name} <-> {b.name}"


def m_drop_node(gd, rng):
    if not gd.node:
        return None
    i = rng.randrange(len(gd.node))
    name = gd.node[i].name
    del gd.node[i]
    return f"dropped {name}"


def m_op_swap(gd, rng):
    node = _pick(rng, gd.node)
    if node is None:
        return None
    old = node.op
    node.op = rng.choice(["", "NoSuchOp", "Enter", "Exit", "Merge", "Switch", "NextIteration",
                          "LoopCond", "_Recv", "_Send", "Placeholder", "VariableV2", "Assign",
                          "MatMul", "Const", "PyFunc", "system"])
    return f"{node.name}: {old} -> {node.op}"


def m_dtype(gd, rng):
    node = _pick(rng, gd.node, lambda n: any(k in n.attr for k in ("T", "dtype")))
    if node is None:
        return None
    key = "T" if "T" in node.attr else "dtype"
    node.attr[key].type = rng.choice([1, 2, 3, 7, 9, 10, 19, 20, 101])
    return f"{node.name}.{key} = {node.attr[key].type}"


def m_device(gd, rng):
    node = _pick(rng, gd.node)
    if node is None:
        return None
    node.device = rng.choice(["/job:nope/task:9/device:XPU:3", "garbage", "/device:GPU:7",
                              "/job:localhost/replica:0/task:0/device:CPU:5", ":::", "/gpu:*"])
    return f"{node.name} on {node.device}"


def m_weird_name(gd, rng):
    node = _pick(rng, gd.node)
    if node is None:
        return None
    node.name = rng.choice(["", "a:b", "^x", "a\nb", "\u00e9/\u4e2d", "x" * 5000, "$(id)",
                            "`id`", "'; rm -rf /; '"])
    return "weird node name"


def m_splat(gd, rng):
    """A Const (or a new one feeding a node) turned into one value claiming 2**27-2**31
    elements: decoding or folding it would take gigabytes from a few bytes."""
    node = _pick(rng, gd.node, lambda n: n.op == "Const")
    if node is None:
        return None
    t = node.attr["value"].tensor
    dtype, field, value = rng.choice([(2, "double_val", 1.5), (7, "string_val", b"x"),
                                      (1, "float_val", 2.0), (9, "int64_val", 3)])
    t.Clear()
    t.dtype = dtype
    node.attr["dtype"].type = dtype
    for d in rng.choice([[1 << 27], [1 << 14, 1 << 14], [1 << 31], [1 << 16, 1 << 15]]):
        t.tensor_shape.dim.add().size = d
    getattr(t, field).append(value)
    return f"Const {node.name} is a splat of {[d.size for d in t.tensor_shape.dim]}"


def m_library_bomb(gd, rng):
    """A function library where each level calls the next twice and the leaf holds a large
    attr, called from the graph: inlining would copy the leaf 2**levels times."""
    levels = rng.choice([12, 16, 24])
    base = f"fuzz_bomb_{rng.randrange(1 << 30)}"
    for level in range(levels + 1):
        f = gd.library.function.add()
        f.signature.name = f"{base}_{level}"
        if level == levels:
            f.node_def.add(name="leaf", op="NoOp").attr["payload"].s = b"p" * (1 << 16)
            continue
        for k in range(2):
            f.node_def.add(name=f"call{k}", op=f"{base}_{level + 1}")
    gd.node.add(name=f"{base}_root", op=f"{base}_0")
    return f"library bomb of {levels} levels"


def _deep_text(gd, rng):
    """Text form with a node whose attr nests 30-300 function values (3 messages each; Python's
    text parser recursed until RecursionError, and past 99 messages the binary form cannot be
    read back). Built as text: the message itself would be too deep to print."""
    from google.protobuf import text_format

    levels = rng.choice([30, 40, 300])
    inner = "i: 1"
    for _ in range(levels):
        inner = 'func { name: "f" attr { key: "a" value { %s } } }' % inner
    deep = 'node { name: "fuzz_deep" op: "NoOp" attr { key: "a" value { %s } } }\n' % inner
    return (text_format.MessageToString(gd) + deep).encode(), \
        f"text with {levels} nested attr levels"


STRUCTURAL = {
    "wrong_attr_type": m_wrong_attr_type, "huge_shape": m_huge_shape,
    "negative_dims": m_negative_dims, "bad_port": m_bad_port, "self_loop": m_self_loop,
    "switch_without_pred": m_switch_without_pred, "merge_mismatch": m_merge_mismatch,
    "exit_without_enter": m_exit_without_enter, "no_loopcond": m_no_loopcond,
    "dangling": m_dangling, "duplicate": m_duplicate, "cycle": m_cycle,
    "drop_node": m_drop_node, "op_swap": m_op_swap, "dtype": m_dtype, "device": m_device,
    "weird_name": m_weird_name, "splat": m_splat, "library_bomb": m_library_bomb,
}
BYTE_LEVEL = ("flip_bits", "truncate", "deep_text")
MUTATORS = BYTE_LEVEL + tuple(STRUCTURAL)


# --- mutations of real models: functional loops, function calls, TensorLists, tables ---------
# (tests/fixtures/real_*: `--real` adds those seeds and these mutators)
def _every_node(gd):
    """The graph's nodes and every library function's node_defs."""
    return list(gd.node) + [n for f in gd.library.function for n in f.node_def]


def _function(gd, name):
    return next((f for f in gd.library.function if f.signature.name == name), None)


def m_while_function(gd, rng):
    """A While/StatelessWhile (or If) whose cond/body function is missing, calls the loop's own
    function again (recursion), has an input or a type dropped, or a type changed."""
    node = _pick(rng, _every_node(gd), lambda n: n.op in (
        "While", "StatelessWhile", "If", "StatelessIf") and n.input)
    if node is None:
        return None
    keys = [k for k in ("cond", "body", "then_branch", "else_branch") if k in node.attr]
    if not keys:
        return None
    key = rng.choice(keys)
    fname = node.attr[key].func.name
    fn = _function(gd, fname)
    how = rng.choice(["missing", "recursive", "drop_input", "drop_arg", "type", "swap",
                      "no_output", "parallel"])
    if how == "missing":
        node.attr[key].func.name = "fuzz_missing_function"
    elif how == "recursive" and fn is not None and \
            len(fn.signature.input_arg) >= len(node.input):  # the function runs the node again
        call = fn.node_def.add()
        call.CopyFrom(node)
        call.name = "fuzz_recursive_call"
        call.ClearField("input")
        call.input.extend(a.name for a in fn.signature.input_arg[:len(node.input)])
    elif how == "drop_input":
        del node.input[rng.randrange(len(node.input))]
    elif how == "drop_arg" and fn is not None and fn.signature.input_arg:
        del fn.signature.input_arg[rng.randrange(len(fn.signature.input_arg))]
    elif how == "type" and ("T" in node.attr or "Tin" in node.attr):
        types = node.attr["T" if "T" in node.attr else "Tin"].list.type
        if not types:
            return None
        types[rng.randrange(len(types))] = rng.choice([1, 3, 7, 10, 20, 21])
    elif how == "swap" and len(keys) > 1:
        a, b = node.attr[keys[0]].func.name, node.attr[keys[1]].func.name
        node.attr[keys[0]].func.name, node.attr[keys[1]].func.name = b, a
    elif how == "no_output" and fn is not None and fn.signature.output_arg:
        del fn.signature.output_arg[-1]
    elif how == "parallel" and "parallel_iterations" in node.attr:
        node.attr["parallel_iterations"].i = rng.choice([0, -1, 1 << 40])
    else:
        return None
    return f"{node.op} {node.name}.{key} ({fname}): {how}"


def m_call_cycle(gd, rng):
    """A cycle of PartitionedCall/StatefulPartitionedCall through the function library (or an
    existing function made to call itself)."""
    op = rng.choice(["PartitionedCall", "StatefulPartitionedCall"])
    base = f"fuzz_cycle_{rng.randrange(1 << 30)}"
    existing = [f for f in gd.library.function if f.signature.input_arg]
    if existing and rng.random() < 0.5:
        fn = rng.choice(existing)
        call = fn.node_def.add(name="fuzz_self_call", op=op)
        call.input.append(fn.signature.input_arg[0].name)
        call.attr["f"].func.name = fn.signature.name
        call.attr["Tin"].list.type.append(fn.signature.input_arg[0].type or 1)
        call.attr["Tout"].list.SetInParent()
        return f"{fn.signature.name} calls itself through {op}"
    length = rng.choice([1, 2, 3])
    for k in range(length):
        f = gd.library.function.add()
        f.signature.name = f"{base}_{k}"
        arg = f.signature.input_arg.add(name="x", type=1)
        f.signature.output_arg.add(name="y", type=1)
        call = f.node_def.add(name="call", op=op, input=[arg.name])
        call.attr["f"].func.name = f"{base}_{(k + 1) % length}"
        call.attr["Tin"].list.type.append(1)
        call.attr["Tout"].list.type.append(1)
        f.ret["y"] = "call:output:0"
    _const(gd, f"{base}_x", 1, 1.0)
    root = gd.node.add(name=f"{base}_root", op=op, input=[f"{base}_x"])
    root.attr["f"].func.name = f"{base}_0"
    root.attr["Tin"].list.type.append(1)
    root.attr["Tout"].list.type.append(1)
    return f"a cycle of {length} {op}"


def m_list_attrs(gd, rng):
    """A TensorList/TensorArray op whose element dtype or element shape contradicts the data,
    or whose size is huge or negative."""
    node = _pick(rng, _every_node(gd), lambda n: n.op.startswith(("TensorList", "TensorArray",
                                                                   "EmptyTensorList")))
    if node is None:
        return None
    keys = [k for k in ("element_dtype", "dtype", "shape_type") if k in node.attr]
    how = rng.choice(["dtype", "shape", "shape"] if keys else ["shape"])
    if how == "dtype":
        key = rng.choice(keys)
        node.attr[key].type = rng.choice([1, 2, 3, 7, 9, 10, 21])
        return f"{node.op} {node.name}.{key} = {node.attr[key].type}"
    if "element_shape" in node.attr or "element_shape_except0" in node.attr:
        key = "element_shape" if "element_shape" in node.attr else "element_shape_except0"
        shape = node.attr[key].shape
        shape.ClearField("dim")
        shape.unknown_rank = False
        for d in rng.choice([[7, 7, 7], [1 << 40], [1 << 31, 1 << 31], [0], [-5]]):
            shape.dim.add().size = d
        return f"{node.op} {node.name}.{key} = {[d.size for d in shape.dim]}"
    node.attr["element_shape"].shape.dim.add().size = rng.choice([1 << 40, 7, -3])
    return f"{node.op} {node.name} gets an element_shape attr"


def m_list_size(gd, rng):
    """The size/num_elements/element_shape constant of a TensorList or TensorArray made huge
    or negative (TensorArrayV3 size, TensorListReserve num_elements and element_shape)."""
    nodes = _every_node(gd)
    consts = {n.name: n for n in nodes if n.op == "Const"
              and n.attr["value"].tensor.dtype in (3, 9)}
    cands = [(n, i, consts[s.split(":")[0]]) for n in nodes
             if n.op in ("TensorArrayV3", "TensorListReserve", "EmptyTensorList")
             for i, s in enumerate(n.input[:2]) if s.split(":")[0] in consts]
    if not cands:
        return None
    node, idx, const = rng.choice(cands)
    src = const.name
    t = const.attr["value"].tensor
    t.ClearField("tensor_content")
    t.ClearField("int_val")
    t.ClearField("int64_val")
    n = t.tensor_shape.dim[0].size if t.tensor_shape.dim else 0
    value = rng.choice([(1 << 31) - 1, -7, 1 << 20] + ([1 << 40] if t.dtype == 9 else []))
    vals = [value] * max(n, 1) if t.tensor_shape.dim else [value]
    (t.int_val if t.dtype == 3 else t.int64_val).extend(vals)
    return f"{node.op} {node.name} input {idx} ({src}) = {value}"


def m_table_dtype(gd, rng):
    """A lookup table op (a hash table, a find, an import or init) with a wrong key or value
    dtype."""
    names = ("key_dtype", "value_dtype", "Tin", "Tout", "Tkey", "Tval")
    node = _pick(rng, _every_node(gd), lambda n: ("Table" in n.op or "Lookup" in n.op)
                 and any(k in n.attr for k in names))
    if node is None:
        return None
    keys = [k for k in names if k in node.attr]
    key = rng.choice(keys)
    node.attr[key].type = rng.choice([1, 2, 3, 7, 9, 10, 21, 20])
    return f"{node.op} {node.name}.{key} = {node.attr[key].type}"


def m_string_huge(gd, rng):
    """A string tensor with a huge declared shape: a Const splat of a long string, a string
    Placeholder of 2**40 elements, or a Fill of a string."""
    how = rng.choice(["const", "const", "placeholder", "fill"])
    name = f"fuzz_str_{rng.randrange(1 << 20)}"
    dims = rng.choice([[1 << 40], [1 << 20, 1 << 20], [1 << 28], [1 << 31]])
    if how == "const":
        node = _pick(rng, gd.node, lambda n: n.op == "Const"
                     and n.attr["value"].tensor.dtype == 7)
        if node is None:
            node = gd.node.add(name=name, op="Const")
        t = node.attr["value"].tensor
        t.Clear()
        t.dtype = 7
        node.attr["dtype"].type = 7
        for d in dims:
            t.tensor_shape.dim.add().size = d
        t.string_val.append(b"s" * rng.choice([1, 1 << 16]))
        return f"string Const {node.name} of {dims}"
    if how == "placeholder":
        node = gd.node.add(name=name, op="Placeholder")
        node.attr["dtype"].type = 7
        for d in dims:
            node.attr["shape"].shape.dim.add().size = d
        gd.node.add(name=name + "_len", op="StringLength", input=[name])
        return f"string Placeholder of {dims}"
    shape = gd.node.add(name=name + "_dims", op="Const")
    shape.attr["dtype"].type = 9
    shape.attr["value"].tensor.dtype = 9
    shape.attr["value"].tensor.tensor_shape.dim.add().size = len(dims)
    shape.attr["value"].tensor.int64_val.extend(dims)
    value = gd.node.add(name=name + "_value", op="Const")
    value.attr["dtype"].type = 7
    value.attr["value"].tensor.dtype = 7
    value.attr["value"].tensor.string_val.append(b"x" * 1024)
    fill = gd.node.add(name=name, op="Fill", input=[shape.name, value.name])
    fill.attr["T"].type = 7
    fill.attr["index_type"].type = 9
    return f"string Fill of {dims}"


def m_max_iterations(gd, rng):
    """A loop bound made huge: a functional While's maximum_iterations input, or the int
    constant a v1 loop's Less compares its counter with."""
    nodes = _every_node(gd)
    by_name = {n.name: n for n in nodes}
    consts = [n for n in nodes if n.op == "Const" and "maximum_iterations" in n.name]
    for less in (n for n in nodes if n.op in ("Less", "LessEqual", "Greater")):
        for s in less.input:
            src = by_name.get(s.split(":")[0].lstrip("^"))
            if src is not None and src.op == "Enter" and src.input:  # v1: bound enters the loop
                src = by_name.get(src.input[0].split(":")[0])
            if src is not None and src.op == "Const":
                consts.append(src)
    consts = [c for c in consts if c.attr["value"].tensor.dtype in (3, 9)
              and not c.attr["value"].tensor.tensor_shape.dim]
    if not consts:
        return None
    c = rng.choice(consts)
    t = c.attr["value"].tensor
    t.ClearField("tensor_content")
    t.ClearField("int_val")
    t.ClearField("int64_val")
    value = rng.choice([(1 << 31) - 1, 1 << 40, -1]) if t.dtype == 9 else \
        rng.choice([(1 << 31) - 1, -1])
    (t.int_val if t.dtype == 3 else t.int64_val).append(value)
    return f"loop bound {c.name} = {value}"


def m_enter_frame(gd, rng):
    """Enter nodes of one loop given inconsistent frame names, parallel_iterations 0 or
    negative or huge, or is_constant flipped."""
    enters = [n for n in _every_node(gd) if n.op in ("Enter", "RefEnter")]
    if not enters:
        return None
    node = rng.choice(enters)
    how = rng.choice(["frame", "frame", "parallel", "parallel", "constant", "frame_all_empty"])
    if how == "frame":
        node.attr["frame_name"].s = rng.choice([b"fuzz_other_frame", b"", b"\xff\xfe"])
        return f"Enter {node.name} moves to frame {node.attr['frame_name'].s!r}"
    if how == "frame_all_empty":
        for n in enters:
            n.attr["frame_name"].s = b"one_frame"
        return f"{len(enters)} Enters all in one frame"
    if how == "parallel":
        value = rng.choice([0, -1, -(1 << 40), 1 << 40])
        frame = node.attr["frame_name"].s
        for n in enters:
            if n.attr["frame_name"].s == frame and rng.random() < 0.7:
                n.attr["parallel_iterations"].i = value
        node.attr["parallel_iterations"].i = value
        return f"frame {frame!r}: parallel_iterations = {value}"
    node.attr["is_constant"].b = not node.attr["is_constant"].b
    return f"Enter {node.name}.is_constant flipped"


REAL = {
    "while_function": m_while_function, "call_cycle": m_call_cycle,
    "list_attrs": m_list_attrs, "list_size": m_list_size, "table_dtype": m_table_dtype,
    "string_huge": m_string_huge, "max_iterations": m_max_iterations,
    "enter_frame": m_enter_frame,
}
REAL_MUTATORS = tuple(REAL)


def mutate(seed, mutator, rng, extra=0):
    """Apply `mutator` (then `extra` random structural ones) to `seed` -> (bytes, [what])."""
    done = []
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(seed.data)
    names = [mutator] + [rng.choice(tuple(STRUCTURAL)) for _ in range(extra)]
    for name in names:
        if name in STRUCTURAL or name in REAL:
            what = (STRUCTURAL.get(name) or REAL[name])(gd, rng)
            if what:
                done.append(f"{name}: {what}")
    data = gd.SerializeToString()
    if mutator == "flip_bits":
        raw = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if raw:
                raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        data = bytes(raw)
        done.insert(0, "flip_bits")
    elif mutator == "truncate":
        data = data[:rng.randrange(len(data) + 1)]
        done.insert(0, f"truncate to {len(data)} bytes")
    elif mutator == "deep_text":
        data, what = _deep_text(gd, rng)
        done.insert(0, what)
    return data, done


# --- commands --------------------------------------------------------------------------------
def commands(seed, graph_path, outdir):
    """{subcommand: (argv, output path or None)} for one mutated graph."""
    out = pathlib.Path(outdir)
    fetches = ",".join(seed.fetches) or "nope:0"
    cmds = {
        "info": (["info", graph_path, "--json"], None),
        "convert": (["convert", graph_path, "-o", out / "c.pbtxt"], out / "c.pbtxt"),
        "render": (["render", graph_path, "-o", out / "r.dot"], out / "r.dot"),
        "grad": (["grad", graph_path, "--ys", ",".join(seed.ys) or "nope",
                  "--xs", ",".join(seed.xs) or "nope", "-o", out / "g.pb"], out / "g.pb"),
        "optimize": (["optimize", graph_path, "--keep", fetches, "-o", out / "o.pb"],
                     out / "o.pb"),
        "prune": (["prune", graph_path, "--fetch", fetches, "-o", out / "p.pb"], out / "p.pb"),
        "place": (["place", graph_path, "--devices", "cpu:2", "-o", out / "pl.pb"],
                  out / "pl.pb"),
        "partition": (["partition", graph_path, "--devices", "cpu:2", "-o", out / "pa.pb"],
                      out / "pa.pb"),
    }
    run = ["run", graph_path, "--max-memory", RUN_MAX_MEMORY, "-o", out / "r.npz"]
    if seed.devices:
        run += ["--devices", seed.devices]
    if seed.feeds is not None:
        run += ["--feeds", seed.feeds]
    run += ["--fetch", fetches]
    for t in seed.targets:
        run += ["--target", t]
    for t in seed.init:
        run += ["--init", t]
    cmds["run"] = (run, out / "r.npz")
    return {k: ([str(a) for a in argv], o) for k, (argv, o) in cmds.items()}


class Hang(BaseException):
    """Raised by the alarm in an in-process command that ran past the time bound; its argument
    is "hang" or "stuck"."""


def run_in_process(argv, time_bound=None):
    """tfg.cli.main(argv) with swapped std streams -> (exit code, stderr text, seconds)."""
    from tfg.cli import main

    time_bound = TIME_BOUND_S if time_bound is None else time_bound  # read when called
    old = sys.stdin, sys.stdout, sys.stderr
    out, err = pyio.BytesIO(), pyio.BytesIO()
    streams = (pyio.TextIOWrapper(pyio.BytesIO(b"")),
               pyio.TextIOWrapper(out, write_through=True),
               pyio.TextIOWrapper(err, write_through=True))

    window = _stuck_window(time_bound)
    last = {}

    def on_alarm(signum, frame):
        if not last:  # at the time bound: watch the CPU for one more short window
            last["cpu"], last["wall"] = time.process_time(), time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, window)
            return
        raise Hang(_hang_or_stuck(time.process_time() - last["cpu"],
                                  time.monotonic() - last["wall"]))

    prev = signal.signal(signal.SIGALRM, on_alarm)
    # Someone else's alarm (pytest-timeout) is put back afterwards, minus the time we took.
    outer, _ = signal.setitimer(signal.ITIMER_REAL, time_bound)
    sys.stdin, sys.stdout, sys.stderr = streams
    start = time.monotonic()
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Hang as e:
        code = e.args[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.01))
        sys.stdin, sys.stdout, sys.stderr = old
        for s in streams:
            s.flush()
            s.detach()
    return code, err.getvalue().decode("utf-8", "replace"), time.monotonic() - start


def _stuck_window(time_bound):
    """Seconds of CPU watching after the time bound (startup work must not count)."""
    return min(1.0, max(0.2, time_bound / 10))


def _hang_or_stuck(cpu_s, wall_s):
    """A command cancelled at the time bound: "hang" if it computed during the last window,
    "stuck" if it waited."""
    return "stuck" if cpu_s < STUCK_CPU_SHARE * wall_s else "hang"


def _limit_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def run_as_process(argv, time_bound=None):
    """`python -m tfg ARGV` (address space capped at 8 GiB) -> (code, stderr, seconds)."""
    time_bound = TIME_BOUND_S if time_bound is None else time_bound
    start = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "tfg", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         preexec_fn=_limit_memory, cwd=ROOT)
    try:
        _, err = p.communicate(timeout=time_bound)
    except subprocess.TimeoutExpired:  # watch its CPU for one more short window
        cpu, wall = _process_cpu_s(p.pid), time.monotonic()
        try:
            _, err = p.communicate(timeout=_stuck_window(time_bound))
        except subprocess.TimeoutExpired:
            code = _hang_or_stuck(_process_cpu_s(p.pid) - cpu, time.monotonic() - wall)
            p.kill()
            p.communicate()
            return code, "", time.monotonic() - start
    return p.returncode, err.decode("utf-8", "replace"), time.monotonic() - start


def _process_cpu_s(pid):
    """User + system CPU seconds of a running process, all its threads (Linux /proc)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def problems(sub, code, err, output):
    """What is wrong with one command's outcome (an empty list when it ended cleanly)."""
    bad = []
    allowed = (0, 1, 2) if sub == "run" else (0, 2)
    if code == "hang":
        if sub == "run":  # a mutant may loop (a bound of 2**20, a predicate made constant):
            return []     # running it is not a fault as long as it can be stopped (it was)
        return [f"no answer within {TIME_BOUND_S:.0f}s"]
    if code == "stuck":
        return [f"no answer within {TIME_BOUND_S:.0f}s, waiting rather than computing (a "
                "deadlock?)"]
    if code not in allowed:
        bad.append(f"exit {code}")
    if "Traceback" in err:
        bad.append("traceback on stderr")
    if code != 0:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        soft = [ln for ln in lines if ln.startswith("tfg: warning")]
        if len(lines) - len(soft) != 1 or not lines[-1].startswith("tfg: error: "):
            bad.append(f"stderr is not one error line: {err[-300:]!r}")
        if "internal error" in err:
            bad.append("internal error")
        if output is not None and output.exists():
            bad.append("a failed command left its output file")
    if output is not None:
        tmp = [p.name for p in output.parent.iterdir() if p.name.startswith((".tfg-", ".tmp-"))]
        if tmp:
            bad.append(f"temporary files left: {tmp}")
    return bad


def _keep(data, stem):
    """Save a mutant that failed (or looped) where its reproducer can find it."""
    keep = pathlib.Path(os.environ.get("TFG_FUZZ_KEEP", pathlib.Path(tempfile.gettempdir())
                                       / "tfg-fuzz-failures"))
    keep.mkdir(parents=True, exist_ok=True)
    saved = keep / f"{stem}.pb"
    saved.write_bytes(data)
    return saved


class Report:
    def __init__(self):
        self.tried = collections.Counter()  # subcommand -> inputs tried
        self.codes = collections.defaultdict(collections.Counter)  # subcommand -> exit codes
        self.mutators = collections.Counter()
        self.failures = []
        self.cancelled = []  # run mutants stopped at the time bound (loops that never end)
        self.slowest = (0.0, None)
        self.pairs = 0  # (seed, mutator) pairs fuzzed per round

    def summary(self):
        lines = [f"{'subcommand':<10} {'inputs':>7}  exit codes"]
        for sub in (s for s in SUBCOMMANDS if s in self.tried):  # those that ran
            codes = ", ".join(f"{c}: {n}" for c, n in sorted(self.codes[sub].items(),
                                                             key=lambda kv: str(kv[0])))
            lines.append(f"{sub:<10} {self.tried[sub]:>7}  {codes}")
        lines.append(f"total inputs: {sum(self.tried.values())}, distinct graphs: "
                     f"{sum(self.mutators.values())}, failures: {len(self.failures)}, "
                     f"runs cancelled at the time bound: {len(self.cancelled)}, "
                     f"slowest command: {self.slowest[0]:.1f}s {self.slowest[1] or ''}")
        return "\n".join(lines)


def fuzz(seeds, rounds=1, rng_seed=0, mutators=MUTATORS, subcommands=SUBCOMMANDS,
         in_process=True, report=None, log=None, keep=None, skip_unchanged=False):
    """Every seed x mutator (those `keep(seed, mutator)` accepts, when given), `rounds` times,
    through `subcommands`; returns the Report. With `skip_unchanged`, a seed the mutators
    could not change (a loop mutator on a CNN) is not run again."""
    report = report or Report()
    runner = run_in_process if in_process else run_as_process
    with tempfile.TemporaryDirectory(prefix="tfg-fuzz-") as tmp:
        tmp = pathlib.Path(tmp)
        for r in range(rounds):
            for si, seed in enumerate(seeds):
                for mi, mutator in enumerate(mutators):
                    if keep is not None and not keep(seed, mutator):
                        continue
                    report.pairs += r == 0
                    rng = random.Random(f"{rng_seed}/{r}/{seed.name}/{mutator}")
                    data, what = mutate(seed, mutator, rng, extra=rng.choice([0, 0, 1, 2]))
                    if skip_unchanged and not what:
                        continue
                    report.mutators[mutator] += 1
                    graph_path = tmp / f"in-{r}-{si}-{mi}.pb"
                    graph_path.write_bytes(data)
                    outdir = tmp / f"out-{r}-{si}-{mi}"
                    outdir.mkdir()
                    cmds = commands(seed, graph_path, outdir)
                    for sub in subcommands:
                        argv, output = cmds[sub]
                        code, err, secs = runner(argv)
                        report.tried[sub] += 1
                        report.codes[sub][code] += 1
                        if secs > report.slowest[0]:
                            report.slowest = (secs, f"({sub} on {seed.name} {mutator})")
                        bad = problems(sub, code, err, output)
                        if bad or code == "hang":
                            saved = _keep(data, f"{seed.name.replace('/', '_')}-{mutator}-"
                                                 f"s{rng_seed}-r{r}")
                            repro = ' '.join(argv).replace(str(graph_path), str(saved))
                            line = f"{sub} on {seed.name} after {what}: "
                            if bad:
                                report.failures.append(f"{line}{'; '.join(bad)} "
                                                       f"[repro: tfg {repro}]")
                            else:  # a run mutant that loops: cancelled, listed, not a fault
                                report.cancelled.append(f"{line}cancelled after "
                                                        f"{secs:.0f}s [repro: tfg {repro}]")
                            if log:
                                log(("FAIL " if bad else "CANCELLED ")
                                    + (report.failures if bad else report.cancelled)[-1])
                    graph_path.unlink()
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8, help="rounds over seeds x mutators")
    ap.add_argument("--seed", type=int, default=0, help="random stream")
    ap.add_argument("--processes", action="store_true",
                    help="run each command as a process (default: in this process)")
    ap.add_argument("--only", default=None, help="comma list of subcommands")
    ap.add_argument("--mutators", default=None, help="comma list of mutators")
    ap.add_argument("--seeds", default=None,
                    help="comma list of substrings: only the seeds whose name contains one")
    ap.add_argument("--real", action="store_true",
                    help="also the real models (tests/fixtures/real_*, text_models bundles) "
                         "and the mutators aimed at them (default --mutators: all)")
    ap.add_argument("--partitioned", action="store_true",
                    help="also fuzz each seed as `tfg partition --devices cpu:3` writes it")
    ap.add_argument("--bundle-rounds", type=int, default=None,
                    help="rounds over SavedModel seeds x bundle mutators (default: --rounds)")
    ap.add_argument("--time-bound", type=float, default=TIME_BOUND_S,
                    help=f"seconds per command (default {TIME_BOUND_S:.0f})")
    args = ap.parse_args()
    globals()["TIME_BOUND_S"] = args.time_bound  # the runners read it when called
    subs = tuple(args.only.split(",")) if args.only else SUBCOMMANDS
    muts = tuple(args.mutators.split(",")) if args.mutators else \
        MUTATORS + (REAL_MUTATORS if args.real else ())
    seeds = load_seeds(real=args.real)
    if args.partitioned:  # only the seeds --seeds can keep (partitioning a CNN takes seconds)
        parts = args.seeds.replace("partitioned/", "").split(",") if args.seeds else [""]
        seeds += partitioned_seeds([s for s in seeds if any(p in s.name for p in parts)])
    if args.seeds:  # after partitioning: --seeds partitioned/ keeps only those
        seeds = [s for s in seeds if any(part in s.name for part in args.seeds.split(","))]
    start = time.monotonic()
    report = fuzz(seeds, rounds=args.rounds, rng_seed=args.seed, mutators=muts,
                  subcommands=subs, in_process=not args.processes, skip_unchanged=args.real,
                  log=lambda line: print(line, file=sys.stderr))
    print(report.summary())
    print(f"{len(seeds)} seeds, {len(muts)} mutators, {args.rounds} rounds, "
          f"{time.monotonic() - start:.0f}s")
    # Imported here, not at the top: fuzz_bundle imports this module for its runners.
    import fuzz_bundle

    bundle_rounds = args.rounds if args.bundle_rounds is None else args.bundle_rounds
    start = time.monotonic()
    if args.real:  # graph mutators of saved_model.pb: the ones aimed at real models too
        fuzz_bundle.GRAPH_MUTATORS = {**STRUCTURAL, **REAL}
    bundle_seeds = fuzz_bundle.bundle_seeds(real=args.real)
    if args.seeds:
        bundle_seeds = [p for p in bundle_seeds
                        if any(part in p.name for part in args.seeds.split(","))]
    bundles = fuzz_bundle.fuzz_bundles(bundle_seeds, rounds=bundle_rounds,
                                       rng_seed=args.seed, in_process=not args.processes,
                                       log=lambda line: print(line, file=sys.stderr))
    print("SavedModel bundles:\n" + bundles.summary())
    print(f"{len(fuzz_bundle.BUNDLE_MUTATORS)} bundle mutators, {bundle_rounds} rounds, "
          f"{time.monotonic() - start:.0f}s")
    return 1 if report.failures or bundles.failures else 0


if __name__ == "__main__":
    sys.exit(main())
