"""Malformed graphs through EVERY subcommand (info, convert, render, grad, optimize, prune,
place, partition, run): the mutation fuzzer of tools/fuzz.py over the conformance graphs and
the project's fixtures, plus hypothesis choosing seeds and mutation chains.

Each command must end with exit 0, exit 2 (bad input) or, for `run`, exit 1 (a runtime
failure of a valid graph), with one error line on stderr, no traceback, no output file left
after a failure, within the time bound (a `run` that loops for ever is cancelled there; one
that waits without computing is a failure). CI runs a bounded size (every seed x mutator once,
plus a few partitioned seeds); TFG_FUZZ_FULL=1 runs every seed, partitioned too, x mutator for
8 rounds. The inputs tried per subcommand are printed (pytest -s) and asserted.
"""
import os
import pathlib
import random
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import tfg_cli

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
import fuzz  # noqa: E402  (tools/fuzz.py: the engine, also a CLI)

FULL = bool(os.environ.get("TFG_FUZZ_FULL"))
SEEDS = fuzz.load_seeds()


def _ci_seeds():
    """Every seed, one round in CI (~5800 commands, ~40 s of CPU); 8 rounds at full size.
    Partitioned seeds (what `tfg partition` writes: _Send/_Recv pairs, per-device control
    loops) too: a few in CI, all of them at full size."""
    few = ("conformance/while_accum", "conformance/grad_cond_0", "executor/cond_in_while")
    return SEEDS + fuzz.partitioned_seeds([s for s in SEEDS if FULL or s.name in few])


def _ci_pairs(seed, mutator):
    """CI fuzzes 3 of every 4 (seed, mutator) pairs, a fixed choice, to stay near a minute
    with the bundle fuzz (tests/test_fuzz_bundle.py); the full size fuzzes every pair."""
    return FULL or zlib.crc32(f"{seed.name}/{mutator}".encode()) % 4 != 0


@pytest.fixture(scope="module")
def ci_report(tmp_path_factory):
    os.environ["TFG_FUZZ_KEEP"] = str(tmp_path_factory.mktemp("fuzz-failures"))
    seeds = _ci_seeds()
    assert seeds, "no seed graphs found"
    fuzz.TIME_BOUND_S = 20.0
    report = fuzz.fuzz(seeds, rounds=ROUNDS, rng_seed=0, keep=_ci_pairs)
    print("\n" + report.summary())
    report.seeds = seeds
    return report


ROUNDS = 8 if FULL else 1


# At full size the fuzz runs for many minutes: past pytest-timeout's default (pyproject.toml).
# CI's round is ~40 s of CPU. (It was ~4 minutes after the one front door made place and
# partition inline functions: a 12-level library_bomb, 268 MiB once inlined, passed the byte
# cap and was written out at ~5 s CPU a command; tfg/graphdef/functions.py now refuses it by its
# amplification, tests/test_hostile.py.)
@pytest.mark.timeout(4 * 3600 if FULL else 300)
def test_mutation_fuzzer_over_every_subcommand(ci_report):
    assert not ci_report.failures, "\n".join(ci_report.failures[:20])
    for sub in fuzz.SUBCOMMANDS:
        assert ci_report.tried[sub] == ci_report.pairs * ROUNDS
        # Not everything is refused: many mutants are still valid graphs. (`grad` needs a seed
        # naming ys and xs: the conformance cases do, the fixtures alone (no ../shared) not.)
        if sub != "grad" or any(s.ys and s.xs for s in ci_report.seeds):
            assert ci_report.codes[sub][0] > 0, sub
    assert ci_report.pairs > 0.7 * len(ci_report.seeds) * len(fuzz.MUTATORS)
    for mutator in fuzz.MUTATORS:
        assert ci_report.mutators[mutator] > 0


HYPO = settings(deadline=None, derandomize=True, max_examples=200 if FULL else 12,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


@HYPO
@given(st.sampled_from(range(len(SEEDS))) if SEEDS else st.nothing(),
       st.lists(st.sampled_from(fuzz.MUTATORS), min_size=1, max_size=4),
       st.integers(0, 2 ** 32 - 1))
def test_hypothesis_mutation_chains(tmp_path, idx, mutators, rng_seed):
    seed = SEEDS[idx]
    rng = random.Random(rng_seed)
    data = seed.data
    what = []
    for m in mutators:  # a chain: each mutation applies to the previous result
        seed_like = _with_data(seed, data)
        try:
            data, done = fuzz.mutate(seed_like, m, rng)
        except Exception:  # noqa: BLE001 - bytes that no longer parse: mutate them as bytes
            data, done = bytes(reversed(data[:64])) + data[64:], [f"{m} (as bytes)"]
        what += done
    path = tmp_path / "in.pb"
    path.write_bytes(data)
    outdir = tmp_path / "out"
    outdir.mkdir(exist_ok=True)
    for sub, (argv, output) in fuzz.commands(seed, path, outdir).items():
        if output is not None and output.exists():
            output.unlink()
        code, err, _ = fuzz.run_in_process(argv, time_bound=20.0)
        bad = fuzz.problems(sub, code, err, output)
        assert not bad, f"{sub} on {seed.name} after {what}: {bad}"


def _with_data(seed, data):
    clone = object.__new__(fuzz.Seed)
    clone.__dict__.update(seed.__dict__)
    clone.data = data
    return clone


def test_as_processes(tmp_path):
    """A few mutants as real processes (address space capped): no interpreter crash."""
    seeds = [s for s in SEEDS if s.name.endswith(("while_simple", "train_sgd"))][:1] or SEEDS[:1]
    fuzz.TIME_BOUND_S = 60.0
    report = fuzz.fuzz(seeds, mutators=("flip_bits", "huge_shape"), in_process=False,
                       rng_seed=3)
    print("\n" + report.summary())
    assert not report.failures, "\n".join(report.failures)
    assert sum(report.tried.values()) == 2 * len(fuzz.SUBCOMMANDS) * len(seeds)


# --- the targeted cases the issue lists, each through every subcommand -----------------------
def _builder_seed(tmp_path):
    """A loop + cond + variable graph of our own (no conformance checkout needed)."""
    import numpy as np

    from tfg import builder as tb
    from tfg.graphdef import io

    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2], name="x")
        w = tb.Variable(np.ones(2, np.float32), name="w")
        _, acc = tb.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + x * w),
                               [tb.constant(0), tb.zeros([2])])
        y = tb.cond(tb.reduce_sum(acc) > 0, lambda: acc * 2.0, lambda: acc)
        tb.identity(tb.reduce_sum(y), name="out")
        tb.global_variables_initializer()
    folder = tmp_path / "seed"
    folder.mkdir()
    io.save(g.graph, str(folder / "graph.pb"))
    np.savez(folder / "feeds.npz", **{"x:0": np.array([1.0, 2.0], np.float32)})
    (folder / "case.json").write_text('{"fetches": ["out:0"], "init": ["init"], '
                                      '"feeds": ["x:0"], "xs": ["x:0"]}')
    return fuzz.Seed("builder/loop_cond_var", folder)


@pytest.mark.parametrize("mutator", fuzz.MUTATORS)
def test_each_mutator_on_a_builder_graph(tmp_path, mutator):
    seed = _builder_seed(tmp_path)
    fuzz.TIME_BOUND_S = 20.0
    report = fuzz.fuzz([seed], rounds=2, mutators=(mutator,), rng_seed=11)
    assert not report.failures, "\n".join(report.failures)
    assert sum(report.tried.values()) == 2 * len(fuzz.SUBCOMMANDS)


FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def _real_seed(mutator):
    """A small real model with what `mutator` aims at: a functional beam search (StatelessWhile,
    TensorLists, maximum_iterations), a v1 one (Enter frames), a SavedModel's lookup graph."""
    if mutator == "table_dtype":  # the graph of a text model (HashTableV2, LookupTableFindV2)
        from tfg.schemas.proto import saved_model_pb2  # lazy: this one test reads a bundle

        sm = saved_model_pb2.SavedModel()
        sm.ParseFromString((FIXTURES / "text_models" / "vocab_file" / "saved_model.pb")
                           .read_bytes())
        seed = object.__new__(fuzz.Seed)
        seed.__dict__.update(name="text_models/vocab_file", feeds=None, fetches=[], targets=[],
                             init=[], ys=[], xs=[], devices=None,
                             data=sm.meta_graphs[0].graph_def.SerializeToString())
        return seed
    area = ("real_models/tf1_beam_search" if mutator == "enter_frame"
            else "real_loops/tf2_beam_search_functional")
    return fuzz.Seed(area, FIXTURES / area)


@pytest.mark.parametrize("mutator", fuzz.REAL_MUTATORS)
def test_each_real_model_mutator(mutator):
    """The mutators aimed at real models (`fuzz.py --real`) change their seed, and the mutants
    pass every subcommand (a bound made 2**31 is not run: it loops, legitimately)."""
    seed = _real_seed(mutator)
    for k in range(2):
        assert fuzz.mutate(seed, mutator, random.Random(f"11/{k}"))[1], mutator
    fuzz.TIME_BOUND_S = 20.0
    subs = tuple(s for s in fuzz.SUBCOMMANDS if mutator != "max_iterations" or s != "run")
    report = fuzz.fuzz([seed], rounds=2, mutators=(mutator,), subcommands=subs, rng_seed=11,
                       skip_unchanged=True)
    assert not report.failures, "\n".join(report.failures)
    assert sum(report.tried.values()) == 2 * len(subs)


def test_unmutated_seed_runs(tmp_path):
    """The builder seed itself passes every subcommand with exit 0 (the harness is sound)."""
    seed = _builder_seed(tmp_path)
    outdir = tmp_path / "o"
    outdir.mkdir()
    for sub, (argv, output) in fuzz.commands(seed, seed_path(seed, tmp_path), outdir).items():
        code, err, _ = fuzz.run_in_process(argv)
        assert code == 0, f"{sub}: {err}"
        if output is not None:
            assert output.exists()


def seed_path(seed, tmp_path):
    p = tmp_path / "seed.pb"
    p.write_bytes(seed.data)
    return p


def test_grad_of_conv_with_a_dangling_input_is_an_input_error(tmp_path):
    import numpy as np

    from tfg import builder as tb

    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [1, 4, 4, 1], name="x")
        w = tb.constant(np.ones((2, 2, 1, 1), np.float32), name="w")
        tb.reduce_sum(tb.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", name="conv"), name="out")
    gd = g.graph.to_proto()
    for nd in gd.node:
        if nd.name == "conv":
            nd.input.append("nope:3")
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    p = tfg_cli("grad", path, "--ys", "out", "--xs", "x", "-o", tmp_path / "o.pb", check=False)
    assert p.returncode == 2, p.stderr


def test_optimize_does_not_materialize_a_large_fill(tmp_path):
    import subprocess

    from tfg import builder as tb
    from tfg.graphdef import io

    with tb.Graph() as g:
        tb.identity(tb.fill(tb.constant([1 << 14, 1 << 13]), 1.0), name="y")  # 512 MiB
    path = tmp_path / "g.pb"
    io.save(g.graph, str(path))
    # The child reports its own peak (VmHWM belongs to its address space; ru_maxrss would also
    # count the pytest process it was forked from).
    child = ("import sys\nfrom tfg.cli import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit as e:\n    code = e.code\n"
             "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
             "print(code, int(peak.split()[1]))\n")
    proc = subprocess.run([sys.executable, "-c", child, "optimize", str(path), "-o",
                           str(tmp_path / "o.pb")], capture_output=True, text=True, check=True)
    code, peak_kib = proc.stdout.split()
    assert code in ("0", "None"), proc.stderr
    assert int(peak_kib) < 300 * 1024, f"peak RSS {int(peak_kib) // 1024} MB"


@pytest.mark.parametrize("attr", ["frame_name", "is_constant", "parallel_iterations"])
def test_enter_with_a_tensor_frame_name_is_an_input_error(tmp_path, attr):
    from tfg import builder as tb

    with tb.Graph() as g:
        _, acc = tb.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0),
                               [tb.constant(0), tb.constant(1.0)])
        tb.identity(acc, name="out")
    gd = g.graph.to_proto()
    for nd in gd.node:
        if nd.op == "Enter":
            nd.attr[attr].CopyFrom(fuzz._attr_of_kind(random.Random(0), "tensor"))
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    # info and render describe malformed control flow (exit 0, the problem in the summary, as
    # for any malformed loop); partition needs the frames, so it refuses: exit 2, one line
    # naming the Enter and the attr.
    for argv, want in ((["info", path], 0), (["render", path, "-o", tmp_path / "r.dot"], 0),
                       (["partition", path, "--devices", "cpu:2", "-o", tmp_path / "p.pb"], 2)):
        code, err, _ = fuzz.run_in_process([str(a) for a in argv])
        assert code == want and not fuzz.problems(argv[0], code, err, None), err
        assert want == 0 or (f"attr {attr!r}" in err and "Enter" in err), err


@pytest.mark.parametrize("sub", ["convert", "optimize", "grad"])
def test_output_into_a_missing_folder_is_an_input_error(tmp_path, sub):
    from tfg import builder as tb
    from tfg.graphdef import io

    with tb.Graph() as g:
        tb.identity(tb.placeholder(tb.float32, [], name="x") * 2.0, name="y")
    path = tmp_path / "g.pb"
    io.save(g.graph, str(path))
    target = tmp_path / "no" / "such" / "dir" / "o.pb"
    extra = ["--ys", "y", "--xs", "x"] if sub == "grad" else []
    code, err, _ = fuzz.run_in_process([sub, str(path), *extra, "-o", str(target)])
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1, err
    assert not target.parent.exists()


# --- regressions from the full-size fuzz (tools/fuzz.py --rounds 8) --------------------------
def _loop_graph():
    """while i < 3: (i + 1, a * 2.0); `out` = the final a. Returns the GraphDef message."""
    from tfg import builder as tb

    with tb.Graph() as g:
        _, acc = tb.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0),
                               [tb.constant(0), tb.constant(1.0)])
        tb.identity(acc, name="out")
    return g.graph.to_proto()


def _first(gd, op):
    return next(nd for nd in gd.node if nd.op == op)


@pytest.mark.parametrize("kind", ["i", "s", "tensor"])
@pytest.mark.parametrize("sub", ["optimize", "prune"])
def test_a_malformed_colocation_attr_is_no_crash(tmp_path, sub, kind):
    """A `_class` attr that is an int, a string or a tensor (not a list of strings) crashed the
    colocation fix-up of optimize and prune (AttributeError); it names no group now, as the
    placer reads it."""
    gd = _loop_graph()
    _first(gd, "Switch").attr["_class"].CopyFrom(fuzz._attr_of_kind(random.Random(0), kind))
    path, out = tmp_path / "g.pb", tmp_path / "o.pb"
    path.write_bytes(gd.SerializeToString())
    flag = "--keep" if sub == "optimize" else "--fetch"
    code, err, _ = fuzz.run_in_process([sub, str(path), flag, "out", "-o", str(out)])
    assert code == 0 and out.exists(), err


def _run_cli(tmp_path, gd):
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    out = tmp_path / "r.npz"
    code, err, _ = fuzz.run_in_process(["run", str(path), "--fetch", "out", "-o", str(out)],
                                       time_bound=20.0)
    assert not fuzz.problems("run", code, err, out), err
    return code, err


@pytest.mark.parametrize("op", ["Enter", "Exit", "NextIteration", "LoopCond", "Switch",
                                "Merge"])
def test_run_refuses_a_control_flow_node_without_its_inputs(tmp_path, op):
    """A Const op-swapped into a control-flow op has no data input: the executor ran it and
    crashed on `args[0]` (IndexError, exit 1 'internal error'). Now: exit 2 naming the node
    (`tfg run` validates as TensorFlow's import does, so the Const's leftover attrs may be what
    is named first)."""
    gd = _loop_graph()
    victim = next(nd for nd in gd.node if nd.op == "Const" and not nd.input)
    victim.op = op
    victim.attr["T"].type = 1
    if op == "Enter":
        victim.attr["frame_name"].s = b"f"
    code, err = _run_cli(tmp_path, gd)
    assert code == 2 and f"{victim.name!r} ({op})" in err, err


def test_run_refuses_a_switch_without_its_predicate(tmp_path):
    gd = _loop_graph()
    sw = _first(gd, "Switch")
    del sw.input[1]
    code, err = _run_cli(tmp_path, gd)
    assert code == 2 and f"{sw.name!r} (Switch)" in err and "(data, pred)" in err, err


def test_run_refuses_a_loop_predicate_that_is_not_bool(tmp_path):
    """A LoopCond fed an int32 (the fuzzer's Less -> Merge swap) ran as a truthy value and looped
    until the time bound; TensorFlow refuses it on import, and so does `tfg run` now."""
    gd = _loop_graph()
    cond = _first(gd, "LoopCond")
    merge = _first(gd, "Merge")  # the counter's Merge (int32)
    assert merge.attr["T"].type == 3
    cond.input[0] = merge.name
    code, err = _run_cli(tmp_path, gd)
    assert code == 2 and f"{cond.name!r} (LoopCond)" in err and "expected bool" in err, err


def test_run_refuses_a_merge_of_a_value_and_a_predicate(tmp_path):
    """The Switch -> Merge swap: Merge(data, pred) forwarded whichever came first, so the loop
    body always ran (a loop that never ends). Now: exit 2 naming the Merge."""
    gd = _loop_graph()
    sw = _first(gd, "Switch")
    sw.op = "Merge"
    sw.attr["N"].i = 2
    code, err = _run_cli(tmp_path, gd)
    assert code == 2 and f"{sw.name!r} (Merge)" in err, err


def test_the_unmutated_loop_runs(tmp_path):
    """The graph the regressions above mutate runs (so each refusal is the mutation's)."""
    code, err = _run_cli(tmp_path, _loop_graph())
    import numpy as np

    assert code == 0, err
    with np.load(tmp_path / "r.npz") as z:
        assert float(z["out"]) == 8.0


def test_a_run_that_loops_forever_is_cancelled_and_listed(tmp_path):
    """A valid loop that never ends (a mutant whose counter is stuck) is not a fault: the run is
    cancelled at the time bound, listed in report.cancelled with a reproducer, and the time
    bound set on the module (fuzz.TIME_BOUND_S) is the one used."""
    from tfg import builder as tb

    with tb.Graph() as g:
        _, acc = tb.while_loop(lambda i, a: i < 3, lambda i, a: (i * 1, a + 1.0),
                               [tb.constant(0), tb.constant(1.0)])
        tb.identity(acc, name="out")
    folder = tmp_path / "seed"
    folder.mkdir()
    (folder / "graph.pb").write_bytes(g.graph.to_proto().SerializeToString())
    (folder / "case.json").write_text('{"fetches": ["out:0"]}')
    seed = fuzz.Seed("builder/endless", folder)
    old = fuzz.TIME_BOUND_S
    fuzz.TIME_BOUND_S = 1.0
    try:
        # no_loopcond (the LoopCond becomes an Identity or is bypassed; this stream adds no
        # other mutation) keeps the graph valid and the loop endless.
        report = fuzz.fuzz([seed], mutators=("no_loopcond",), subcommands=("run",))
    finally:
        fuzz.TIME_BOUND_S = old
    assert not report.failures, report.failures
    assert report.codes["run"]["hang"] == 1 and len(report.cancelled) == 1, report.summary()
    assert "[repro: tfg run " in report.cancelled[0]


def test_session_refuses_a_control_flow_node_without_its_inputs():
    from tfg.errors import GraphValidationError
    from tfg.executor.session import Session
    from tfg.graphdef import io

    gd = _loop_graph()
    victim = next(nd for nd in gd.node if nd.op == "Const" and not nd.input)
    victim.op = "NextIteration"
    victim.attr["T"].type = 1
    with pytest.raises(GraphValidationError, match=f"{victim.name!r} \\(NextIteration\\)"):
        Session(io.loads(gd.SerializeToString())).run("out")
    gd = _loop_graph()  # a LoopCond of an int32: an endless loop before
    cond = _first(gd, "LoopCond")
    cond.input[0] = _first(gd, "Merge").name
    with pytest.raises(GraphValidationError, match="expected bool"):
        Session(io.loads(gd.SerializeToString())).run("out")


@pytest.mark.parametrize("sub", ["grad", "run"])
def test_a_constant_of_an_invalid_dtype_is_an_input_error(tmp_path, sub):
    """A flipped bit made a Const's TensorProto dtype 33: `tfg grad` crashed in DType(33)
    (exit 1, 'internal error'). Now: exit 2 naming the node and the attr."""
    from tfg import builder as tb

    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2], name="x")
        tb.reduce_sum(x * tb.constant([1.0, 2.0], name="c"), name="out")
    gd = g.graph.to_proto()
    next(nd for nd in gd.node if nd.name == "c").attr["value"].tensor.dtype = 33
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    out = tmp_path / ("o.pb" if sub == "grad" else "r.npz")
    argv = (["grad", str(path), "--ys", "out", "--xs", "x"] if sub == "grad" else
            ["run", str(path), "--feed", "x=[1,2]", "--fetch", "out"]) + ["-o", str(out)]
    code, err, _ = fuzz.run_in_process(argv)
    assert code == 2 and not fuzz.problems(sub, code, err, out), err
    assert "'c'" in err and "dtype 33" in err, err


def _partitioned_loop_graph():
    """_loop_graph() as `tfg partition --devices cpu:3 --spread-loops` writes it (GraphDef
    message; the loop split over devices: transfers inside it)."""
    from tfg.graphdef import io
    from tfg.passes.partition import partition

    graph = partition(io.loads(_loop_graph().SerializeToString()), "cpu:3",
                      warn=lambda *a, **k: None, spread_loops=True)
    return graph.to_proto()


def _run_partitioned(tmp_path, gd):
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    out = tmp_path / "r.npz"
    if out.exists():  # from an earlier run of the same test
        out.unlink()
    code, err, _ = fuzz.run_in_process(["run", str(path), "--devices", "cpu:3", "--fetch", "out",
                                        "-o", str(out)], time_bound=20.0)
    assert not fuzz.problems("run", code, err, out), err
    return code, err


@pytest.mark.parametrize("op", ["_Send", "_Recv"])
@pytest.mark.parametrize("attr,kind", [("send_device_incarnation", "tensor"),
                                       ("send_device_incarnation", "list"),
                                       ("recv_device", "s")])
def test_run_refuses_transfer_attrs_of_the_wrong_type(tmp_path, op, attr, kind):
    """A _Send/_Recv whose incarnation is a tensor or a list, or whose device name is not UTF-8
    text: building the rendezvous key crashed (TypeError / UnicodeDecodeError, exit 1
    'internal error'). Now: exit 2 naming the node and the attr."""
    gd = _partitioned_loop_graph()
    code, err = _run_partitioned(tmp_path, gd)
    assert code == 0, err  # the partitioned graph itself runs
    node = _first(gd, op)
    if kind == "s":
        node.attr[attr].s = b"/job:localhost/replica:0/task:0/devic\xe5:CPU:1"
    else:
        node.attr[attr].CopyFrom(fuzz._attr_of_kind(random.Random(0), kind))
    code, err = _run_partitioned(tmp_path, gd)
    assert code == 2 and f"{node.name!r} ({op})" in err and repr(attr) in err, err


@pytest.mark.parametrize("kind", ["tensor", "func"])
def test_render_draws_a_transfer_with_attrs_of_the_wrong_type(tmp_path, kind):
    """render keyed _Send/_Recv pairs by their raw attrs: a tensor or func recv_device crashed it
    (unhashable type, exit 1). Now the malformed pair is drawn without its rendezvous edge."""
    gd = _partitioned_loop_graph()
    recv = _first(gd, "_Recv")
    recv.attr["recv_device"].CopyFrom(fuzz._attr_of_kind(random.Random(0), kind))
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    out = tmp_path / "r.dot"
    code, err, _ = fuzz.run_in_process(["render", str(path), "-o", str(out)])
    assert code == 0 and not fuzz.problems("render", code, err, out), err
    assert recv.name in out.read_text()


@pytest.mark.parametrize("sub", ["place", "partition"])
def test_place_with_a_string_where_a_shape_belongs(tmp_path, sub):
    """A Placeholder's shape attr holding 10,000 bytes was read as 10,000 dims of 120: the cost
    model's FLOP estimate overflowed a float (OverflowError, exit 1). Since stop 46 place and
    partition check attrs against the op signatures as run does (TensorFlow refuses such a
    GraphDef on import): one line naming the node, exit 2, no output file."""
    from tfg import builder as tb

    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2, 2], name="x")
        tb.matmul(x, x, name="mm")
    gd = g.graph.to_proto()
    _first(gd, "Placeholder").attr["shape"].s = b"x" * 10000
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    out = tmp_path / "o.pb"
    code, err, _ = fuzz.run_in_process([sub, str(path), "--devices", "cpu:2", "-o", str(out)])
    assert code == 2 and not fuzz.problems(sub, code, err, out), err
    assert "node 'x' (Placeholder): attr 'shape' must be shape" in err and not out.exists()


def test_a_command_that_waits_past_the_time_bound_is_stuck_and_a_failure(tmp_path):
    """The time bound tells a loop that computes ("hang": a `run` may loop for ever) from a
    command that waits without computing ("stuck": a deadlock, a failure for any subcommand),
    by the CPU time it used. A dequeue from a queue that nobody fills waits."""
    from tfg.graphdef import io
    from tfg.graphdef.graph import Graph
    from tfg.schemas.dtypes import DType

    g = Graph()
    g.add_node("q", "FIFOQueueV2", [], {"component_types": [DType.FLOAT]})
    g.add_node("deq", "QueueDequeueV2", ["q"], {"component_types": [DType.FLOAT]})
    path = tmp_path / "g.pb"
    io.save(g, str(path))
    # Bounds long enough for imports and loading to be over when the CPU is watched, on a
    # loaded machine too.
    code, err, _ = fuzz.run_in_process(["run", str(path), "--fetch", "deq"], time_bound=4.0)
    assert code == "stuck", (code, err)
    assert fuzz.problems("run", code, err, None)
    code, _, _ = fuzz.run_as_process(["run", str(path), "--fetch", "deq"], time_bound=8.0)
    assert code == "stuck"

