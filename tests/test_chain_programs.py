"""Fused chains run as one compiled program (tfg/executor/chain_programs.py): the Keras cells
of the real-model suite take it and give the numpy steps' bytes and TensorFlow's values;
chains built here check each member kind, each broadcast the layout takes, and the
signatures it leaves to the steps, against the kernels' own functions member by member."""
import subprocess
import sys
import types

import numpy as np
import pytest

from tests.case_check import grad_name, load_meta, load_run_case, node_of
from tests.conftest import FIXTURES, ROOT
import tfg
from tfg.executor import Session
from tfg.executor import chain_programs as CP
from tfg.kernels import math_ops
from tfg.kernels.indexing_ops import strided_slice_index

pytest.importorskip("numba")

# What a Session takes a program for (CP.MIN_MEMBERS, elementwise members); the tests
# below build chains of three and four to check the program's members and layouts.
SESSION_MIN_MEMBERS = CP.MIN_MEMBERS


@pytest.fixture(autouse=True)
def short_chains_take_programs(monkeypatch):
    monkeypatch.setattr(CP, "MIN_MEMBERS", 3)


def test_a_session_takes_programs_for_five_elementwise_members_or_more(monkeypatch):
    """Shorter chains run as the numpy steps: a program's call costs about 4 us before its
    first instruction, more than the steps of three or four members on a small cell."""
    monkeypatch.setattr(CP, "MIN_MEMBERS", SESSION_MIN_MEMBERS)
    chain = [("ufunc", np.add, (0, 1), (2,)), ("sigmoid", None, (2,), (3,)),
             ("ufunc", np.multiply, (3, 0), (4,)), ("ufunc", np.subtract, (4, 1), (5,))]
    assert CP.program(chain, [5]) is None
    chain.append(("ufunc", np.add, (5, 0), (6,)))
    assert CP.program(chain, [6]) is not None

F32 = np.float32


def _counting(monkeypatch):
    """{True: programs run, False: calls left to the steps}, over every chain made."""
    counts = {True: 0, False: 0}
    real = CP._runner

    def runner(*args):
        run = real(*args)

        def counted(vals):
            ok = run(vals)
            counts[ok] += 1
            return ok
        return counted
    monkeypatch.setattr(CP, "_runner", runner)
    return counts


def _case(name):
    """(graph, feeds, fetches, expected values, rtol, atol) of a real-model case; a grad case
    differentiated by tfg.grad, its gradients fetched."""
    folder = FIXTURES / "real_models" / name
    meta = load_meta(folder)
    if meta["kind"] != "grad":
        meta, graph, feeds, expected = load_run_case(folder)
        return graph, feeds, meta["fetches"], expected, meta["rtol"], meta["atol"]
    graph = tfg.grad(tfg.load(str(folder / "graph.pb")), ys=[node_of(y) for y in meta["ys"]],
                     xs=[node_of(x) for x in meta["xs"]])
    feeds = dict(np.load(folder / "feeds.npz"))
    with np.load(folder / "expected.npz") as f:
        expected = [f[x] for x in meta["xs"]]
    return graph, feeds, [grad_name(x) for x in meta["xs"]], expected, meta["rtol"], meta["atol"]


@pytest.mark.parametrize("case", ["keras_lstm", "keras_gru", "keras_bilstm_masked",
                                  "keras_lstm_functional", "tf1_dynamic_lstm_grad",
                                  "tf1_bidirectional_lstm_grad", "keras_gru_grad",
                                  "tf1_attention_seq2seq_grad"])
def test_real_cells_run_as_programs_with_the_steps_bytes(case, monkeypatch):
    """Keras LSTM, GRU and BiLSTM cells, TF1 dynamic_rnn's (a Select of whole rows for its
    sequence lengths) and an attention decoder's (its output sliced after the chain): chains of their loops runs as a program from a Session's second
    call on; the outputs (gradients, for the grad cases) are the numpy steps' bytes and
    TensorFlow's values."""
    graph, feeds, fetches, expected, rtol, atol = _case(case)
    counts = _counting(monkeypatch)
    runs = [Session(graph).run(fetches, feeds) for _ in range(2)]
    assert counts[True] > 0, counts  # (each Session's first call plans, then programs run)
    monkeypatch.setenv("TFG_CHAIN_PROGRAMS", "0")
    steps = Session(graph).run(fetches, feeds)
    for got in runs:
        for a, b, want in zip(got, steps, expected):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            np.testing.assert_allclose(a, want, rtol=rtol, atol=atol)


_NUMPY = types.SimpleNamespace(xp=np)  # (the AddN kernel's context: numpy arrays)


def _reference(members, vals, batched=False):
    """The members one by one on the kernels' functions (numpy's ufuncs, the compiled
    Sigmoid and Tanh loops, np.where), as the numpy steps compute them."""
    vals = list(vals)
    for kind, fn, ins, outs in members:
        if kind == "ufunc":
            vals[outs[0]] = fn(*(vals[s] for s in ins))
        elif kind == "sigmoid":
            vals[outs[0]] = math_ops.sigmoid_into(vals[ins[0]])
        elif kind == "bias":
            x, b = vals[ins[0]], vals[ins[1]]
            vals[outs[0]] = x + (b[:, None, :] if batched else b)
        elif kind == "split":
            for o, piece in zip(outs, np.split(vals[ins[1]], len(outs), axis=-1)):
                vals[o] = piece
        elif kind == "slice":
            attrs, _ = fn
            x = vals[ins[0]]
            vals[outs[0]] = x[strided_slice_index(x.shape, *(vals[s] for s in ins[1:]), attrs)]
        elif kind == "select":
            m, x = vals[ins[0]], vals[ins[1]]
            if not fn and m.ndim == 1 and x.ndim > 1:  # (Select's vector: whole rows)
                m = m.reshape(m.shape + (1,) * (x.ndim - 1))
            vals[outs[0]] = np.where(m, x, vals[ins[2]])
        elif kind == "matmul":
            vals[outs[0]] = np.matmul(vals[ins[0]], vals[ins[1]])
        elif kind == "addn":
            vals[outs[0]] = math_ops.add_n(_NUMPY, *(vals[s] for s in ins))
    return vals


def _check(members, vals, escaping, batched=False, pre=()):
    run = CP.program(members, escaping, pre, batched)
    assert run is not None
    got = list(vals)
    assert run(got)
    want = _reference(members, vals, batched)
    for s in escaping:
        assert got[s].shape == want[s].shape and got[s].dtype == want[s].dtype
        assert got[s].tobytes() == np.ascontiguousarray(want[s]).tobytes(), s
    return run, got


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(F32)


def _lstm_cell(B=5, H=6):
    """z = a + xw + bias; i, f, g, o = split(z); c' = sig(f) c + sig(i) tanh(g);
    h' = sig(o) tanh(c'); masked: h' and c' where m, else the old ones."""
    rng = np.random.default_rng(0)
    vals = [None] * 40
    vals[0], vals[1], vals[2] = _rand(rng, B, 4 * H), _rand(rng, B, 4 * H), _rand(rng, 4 * H)
    vals[3], vals[4] = _rand(rng, B, H), _rand(rng, B, H)  # c, h
    vals[5] = np.array(-1, np.int32)  # the Split's axis
    vals[6] = rng.random((B, 1)) < 0.5  # the step mask
    vals[2].flags.writeable = False  # (a Const's bias: read-only)
    members = [("ufunc", np.add, (0, 1), (10,)), ("bias", None, (10, 2), (11,)),
               ("split", None, (5, 11), (12, 13, 14, 15)),
               ("sigmoid", None, (12,), (16,)), ("sigmoid", None, (13,), (17,)),
               ("ufunc", math_ops.tanh_into, (14,), (18,)), ("sigmoid", None, (15,), (19,)),
               ("ufunc", np.multiply, (17, 3), (20,)), ("ufunc", np.multiply, (16, 18), (21,)),
               ("ufunc", np.add, (20, 21), (22,)), ("ufunc", math_ops.tanh_into, (22,), (23,)),
               ("ufunc", np.multiply, (19, 23), (24,)),
               ("select", True, (6, 24, 4), (25,)), ("select", True, (6, 22, 3), (26,))]
    return members, vals


def test_an_lstm_cell_with_a_mask_is_the_kernels_bytes():
    members, vals = _lstm_cell()
    run, got = _check(members, vals, [25, 26, 22])
    plan, = run.plans.values()
    assert (plan.G * plan.R, plan.C) == (5, 6)
    assert got[12] is None and got[23] is None  # (what no one reads after: registers only)


def test_a_signature_is_planned_once_and_a_new_one_again():
    members, vals = _lstm_cell()
    run, _ = _check(members, vals, [25, 26])
    again = list(vals)
    again[3] = _rand(np.random.default_rng(1), 5, 6)
    assert run(again) and len(run.plans) == 1
    members2, vals2 = _lstm_cell(B=3, H=4)
    assert run(list(vals2)) and len(run.plans) == 2


def test_inputs_the_program_copies_first():
    """A read-only operand, a transposed (non-contiguous) one, a 0-d Const and a numpy
    scalar; the next call with the same signature takes the last call's plan."""
    rng = np.random.default_rng(2)
    vals = [None] * 12
    vals[0] = _rand(rng, 7, 4).T  # [4, 7], Fortran order
    vals[1] = _rand(rng, 4, 7)
    vals[1].flags.writeable = False
    vals[2] = np.array(1.0, F32)
    vals[3] = F32(0.5)
    members = [("ufunc", np.subtract, (2, 0), (5,)), ("ufunc", np.multiply, (5, 1), (6,)),
               ("sigmoid", None, (6,), (7,)), ("ufunc", np.negative, (7,), (8,)),
               ("ufunc", np.true_divide, (8, 1), (9,)), ("ufunc", np.add, (9, 3), (10,))]
    run, got = _check(members, vals, [10, 6])
    again = list(vals)
    assert run(again) and run.lookups[0] == 1
    assert again[10].tobytes() == got[10].tobytes()


def test_a_gru_cells_column_slices_are_registers():
    """StridedSlice of column blocks (a GRU's recurrent gates), checked by the kernel's own
    index: the slices and Split pieces take their source's registers, no copy."""
    B, H = 3, 4
    rng = np.random.default_rng(3)
    vals = [None] * 40
    vals[0], vals[1], vals[2] = _rand(rng, B, 3 * H), _rand(rng, B, 3 * H), _rand(rng, B, H)
    vals[3] = np.array(1, np.int32)
    vals[4] = np.array(1.0, F32)
    ends = [(np.array([0, 0], np.int32), np.array([0, H], np.int32)),
            (np.array([0, H], np.int32), np.array([0, 2 * H], np.int32)),
            (np.array([0, 2 * H], np.int32), np.array([0, 0], np.int32))]
    one = np.array([1, 1], np.int32)
    masks = [({"begin_mask": 1, "end_mask": 1}, None), ({"begin_mask": 1, "end_mask": 1}, None),
             ({"begin_mask": 1, "end_mask": 3}, None)]
    members = []
    for k, ((b, e), m) in enumerate(zip(ends, masks)):
        vals[5 + 3 * k], vals[6 + 3 * k], vals[7 + 3 * k] = b, e, one
        members.append(("slice", m, (0, 5 + 3 * k, 6 + 3 * k, 7 + 3 * k), (20 + k,)))
    members += [("split", None, (3, 1), (23, 24, 25)),
                ("ufunc", np.add, (23, 20), (26,)), ("sigmoid", None, (26,), (27,)),
                ("ufunc", np.add, (24, 21), (28,)), ("sigmoid", None, (28,), (29,)),
                ("ufunc", np.multiply, (29, 22), (30,)), ("ufunc", np.add, (25, 30), (31,)),
                ("ufunc", math_ops.tanh_into, (31,), (32,)),
                ("ufunc", np.subtract, (4, 27), (33,)), ("ufunc", np.multiply, (33, 32), (34,)),
                ("ufunc", np.multiply, (27, 2), (35,)), ("ufunc", np.add, (35, 34), (36,))]
    run, _ = _check(members, vals, [36, 21])
    plan, = run.plans.values()
    from tfg.kernels import program_codes as PL
    loads = plan.code[plan.code[:, 0] == PL.LOAD]
    assert len(loads) == 3 + 3 + 1 + 1  # the two [B, 3H] operands, h, the 1: once each


def test_a_batched_cell_reads_one_bias_row_per_loop(monkeypatch):
    """Two loops' values stacked on axis 0 (batched_chain.py): the Split's axis counts from
    the second axis, the [2, 4H] bias is one row per loop."""
    rng = np.random.default_rng(4)
    B, H = 4, 3
    vals = [None] * 30
    vals[0], vals[1], vals[2] = _rand(rng, 2, B, H), _rand(rng, 2, H, 4 * H), _rand(rng, 2, 4 * H)
    vals[3] = 1  # the Split's axis, of each loop's [B, 4H]
    vals[4] = _rand(rng, 2, B, 4 * H)
    vals[5] = rng.random((2, B, 1)) < 0.5
    members = [("matmul", (False, False, None), (0, 1), (10,)),
               ("ufunc", np.add, (10, 4), (11,)), ("bias", None, (11, 2), (12,)),
               ("split", None, (3, 12), (13, 14, 15, 16)),
               ("sigmoid", None, (13,), (17,)), ("ufunc", math_ops.tanh_into, (15,), (18,)),
               ("ufunc", np.multiply, (17, 18), (19,)),
               ("select", True, (5, 19, 0), (20,))]
    from tfg.executor import batched_steps as BS
    _check(members, vals, [20, 19], batched=True, pre=(BS.matmul(0, 1, 10, None),))


def test_a_last_slice_no_member_reads_is_taken_after_the_program():
    """A StridedSlice of rows (not a column block) at the chain's end: the program stores its
    source, and the slice is the step's view of it."""
    rng = np.random.default_rng(7)
    vals = [None] * 20
    vals[0], vals[1] = _rand(rng, 4, 6), _rand(rng, 4, 6)
    vals[2], vals[3], vals[4] = (np.array([1, 0], np.int32), np.array([3, 6], np.int32),
                                 np.array([1, 1], np.int32))
    members = [("ufunc", np.add, (0, 1), (10,)), ("sigmoid", None, (10,), (11,)),
               ("ufunc", np.multiply, (11, 1), (12,)),
               ("slice", ({}, None), (12, 2, 3, 4), (13,))]
    run, got = _check(members, vals, [13])
    plan, = run.plans.values()
    assert plan.post and got[13].base is not None  # (a view of the stored source)


@pytest.mark.parametrize("rank", [2, 3])
def test_selects_vector_condition_picks_rows(rank):
    """Select (not SelectV2) of a [B] condition: whole rows, as TF1's dynamic_rnn masks its
    finished sequences."""
    rng = np.random.default_rng(6)
    shape = (4, 3, 5)[:rank]
    vals = [None] * 20
    vals[0], vals[1] = _rand(rng, *shape), _rand(rng, *shape)
    vals[2] = np.array([True, False, True, False])
    members = [("ufunc", np.add, (0, 1), (10,)), ("sigmoid", None, (10,), (11,)),
               ("select", False, (2, 11, 1), (12,)), ("ufunc", np.multiply, (12, 0), (13,))]
    _check(members, vals, [13, 12])


@pytest.mark.parametrize("change", ["float64", "expanding broadcast", "row slice",
                                    "rank-1 SelectV2 mask", "split along rows"])
def test_signatures_the_layout_does_not_take_are_left_to_the_steps(change):
    rng = np.random.default_rng(5)
    vals = [None] * 20
    vals[0], vals[1] = _rand(rng, 4, 6), _rand(rng, 4, 6)
    vals[2] = rng.random(4) < 0.5
    vals[3] = np.array(-1, np.int32)
    vals[4], vals[5], vals[6] = (np.array([0, 0], np.int32), np.array([2, 6], np.int32),
                                 np.array([1, 1], np.int32))
    members = [("ufunc", np.add, (0, 1), (10,)), ("sigmoid", None, (10,), (11,)),
               ("ufunc", np.multiply, (11, 1), (12,))]
    if change == "float64":
        vals[0], vals[1] = vals[0].astype(np.float64), vals[1].astype(np.float64)
    elif change == "expanding broadcast":
        vals[0], vals[1] = _rand(rng, 4, 1), _rand(rng, 1, 6)
        members[2] = ("ufunc", np.multiply, (11, 11), (12,))
    elif change == "row slice":  # (read by a member after it: not a post slice)
        members.append(("slice", ({}, None), (12, 4, 5, 6), (13,)))
        members.append(("ufunc", np.negative, (13,), (14,)))
    elif change == "rank-1 SelectV2 mask":  # (a [4] mask on [4, 6]: no numpy broadcast)
        members.append(("select", True, (2, 12, 1), (13,)))
    else:
        vals[3] = np.array(0, np.int32)
        members.append(("split", None, (3, 12), (13, 14)))
        members.append(("ufunc", np.add, (13, 14), (15,)))
    run = CP.program(members, [members[-1][3][0]])
    assert run is not None
    got = list(vals)
    assert not run(got)
    assert got == vals or all(a is b for a, b in zip(got, vals))  # nothing written


def test_chains_a_program_does_not_take():
    exp = [("ufunc", np.exp, (0,), (1,)), ("ufunc", np.add, (1, 0), (2,)),
           ("sigmoid", None, (2,), (3,))]
    assert CP.program(exp, [3]) is None  # numpy's exp: not the program's
    short = [("ufunc", np.add, (0, 1), (2,)), ("sigmoid", None, (2,), (3,))]
    assert CP.program(short, [3]) is None  # too few members to pay
    late = [("ufunc", np.add, (0, 1), (2,)), ("sigmoid", None, (2,), (3,)),
            ("ufunc", np.add, (3, 0), (4,)), ("matmul", (False, False, None), (4, 5), (6,))]
    assert CP.program(late, [6], pre=(None,)) is None  # a MatMul of a member: not first


def test_off_where_the_kernels_loops_are_off(numpy_exp, monkeypatch):
    """With vector_math's loops held off, the kernels' Sigmoid is numpy's: so are the steps'."""
    members, vals = _lstm_cell()
    run = CP.program(members, [25])
    assert not run(list(vals))
    monkeypatch.setenv("TFG_CHAIN_PROGRAMS", "0")
    assert CP.program(members, [25]) is None


@pytest.mark.parametrize("seed", range(12))
def test_random_chains_are_the_kernels_bytes(seed):
    """Chains of random members over operands of random broadcasts (a row, a column, a
    scalar, the full shape), against the members one by one."""
    rng = np.random.default_rng(100 + seed)
    L = tuple(int(d) for d in rng.integers(1, 5, size=rng.integers(1, 3)))
    C = int(rng.integers(1, 9))
    full = L + (C,)
    forms = [full, (C,), L[:-1] + (1, C) if L else (C,), L + (1,), ()]
    vals = [None] * 64
    for s in range(6):
        shape = full if s < 2 else forms[int(rng.integers(0, len(forms)))]
        vals[s] = _rand(rng, *shape) * 3
    vals[6] = rng.random(L + (1,)) < 0.5
    members, live, nxt = [], [0, 1], 10
    ufuncs = [np.add, np.subtract, np.multiply, np.true_divide]
    for _ in range(int(rng.integers(3, 12))):
        pick = int(rng.integers(0, 5))
        a = live[int(rng.integers(0, len(live)))]
        if pick == 0:
            b = int(rng.integers(0, 6)) if rng.random() < 0.5 else live[
                int(rng.integers(0, len(live)))]
            members.append(("ufunc", ufuncs[int(rng.integers(0, 4))], (a, b), (nxt,)))
        elif pick == 1:
            members.append(("sigmoid", None, (a,), (nxt,)))
        elif pick == 2:
            members.append(("ufunc", math_ops.tanh_into, (a,), (nxt,)))
        elif pick == 3:
            members.append(("ufunc", np.negative, (a,), (nxt,)))
        else:
            members.append(("select", True, (6, a, live[int(rng.integers(0, len(live)))]),
                            (nxt,)))
        live.append(nxt)
        nxt += 1
    with np.errstate(all="ignore"):
        run = CP.program(members, [live[-1], live[-2]])
        got = list(vals)
        assert run(got)  # (every member's first operand has the full shape: none grows)
        want = _reference(members, vals)
    for s in (live[-1], live[-2]):
        if s < 10:
            continue
        assert got[s].shape == want[s].shape
        assert got[s].tobytes() == np.ascontiguousarray(want[s]).tobytes()


@pytest.mark.parametrize("inputs", [4, 12])
def test_a_cells_gradient_is_the_kernels_bytes(inputs):
    """TanhGrad, SigmoidGrad and AddN of two or more (an LSTM cell's gradient: its nine
    stacked values and the incoming gradients, more than the first tier of input slots),
    against the kernels' own functions."""
    from tfg.kernels import nn_ops
    rng = np.random.default_rng(inputs)
    vals = [None] * 64
    for s in range(inputs):
        vals[s] = _rand(rng, 8, 16) * 2
    vals[0] = np.tanh(vals[0])  # (y of TanhGrad and SigmoidGrad: in their ranges)
    vals[1] = 1 / (1 + np.exp(-vals[1]))
    last = inputs - 1
    members = [("addn", None, tuple(range(2, inputs)), (20,)),
               ("ufunc", nn_ops.tanh_grad_into, (0, 20), (21,)),
               ("ufunc", np.multiply, (21, 1), (22,)),
               ("ufunc", nn_ops.sigmoid_grad_into, (1, 22), (23,)),
               ("addn", None, (23, 21, last), (24,)),
               ("ufunc", np.negative, (24,), (25,))]
    run = CP.program(members, [25, 21])
    got = list(vals)
    assert run(got)
    want = _reference(members, vals)
    for s in (25, 21):
        assert got[s].tobytes() == np.ascontiguousarray(want[s]).tobytes()


def test_a_one_shot_run_of_a_keras_loop_imports_no_numba():
    """Planning a Session's loops writes their programs without numba: a run of one step
    (tfg run) never imports it (tfg/kernels/jit.py)."""
    code = ("import sys; from tests.case_check import load_run_case; "
            "from tfg.executor import Session; "
            "m, g, f, e = load_run_case('tests/fixtures/real_models/keras_lstm'); "
            "Session(g).run(m['fetches'], f); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
