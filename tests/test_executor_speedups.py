"""What the executor's speed-ups must not change: Refs read where the plan says one may arrive
(and errors from those reads naming the node), single-input nodes whose argument travels with
the ready entry (dead values, ControlTrigger), and which kernels may go to the thread pool."""
import numpy as np
import pytest

from tfg.errors import GraphValidationError, TfgRuntimeError
from tfg.executor import Session
from tfg.executor.devices import DeviceSet
from tfg.executor.plan import build_plan
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

F, I32, B = DType.FLOAT, DType.INT32, DType.BOOL


def _loop_over_variable():
    """while i < n: acc += v  (v a reference variable read through a non-ref Enter)."""
    g = Graph()
    g.add_node("v", "VariableV2", [], {"dtype": F, "shape": Shape((2,))})
    g.add_node("v0", "Const", [], {"dtype": F, "value": np.array([1.5, -2], np.float32)})
    g.add_node("init", "Assign", ["v", "v0"], {"T": F})
    g.add_node("n", "Placeholder", [], {"dtype": I32, "shape": Shape(())})
    g.add_node("zero", "Const", [], {"dtype": I32, "value": np.int32(0)})
    g.add_node("acc0", "Const", [], {"dtype": F, "value": np.zeros(2, np.float32)})
    attrs = {"frame_name": b"L", "is_constant": False, "parallel_iterations": 10}
    g.add_node("i_enter", "Enter", ["zero"], {"T": I32, **attrs})
    g.add_node("acc_enter", "Enter", ["acc0"], {"T": F, **attrs})
    g.add_node("n_enter", "Enter", ["n"], {"T": I32, **attrs, "is_constant": True})
    g.add_node("v_enter", "Enter", ["v"], {"T": F, **attrs, "is_constant": True})
    g.add_node("i_merge", "Merge", ["i_enter", "i_next"], {"T": I32, "N": 2})
    g.add_node("acc_merge", "Merge", ["acc_enter", "acc_next"], {"T": F, "N": 2})
    g.add_node("less", "Less", ["i_merge", "n_enter"], {"T": I32})
    g.add_node("cond", "LoopCond", ["less"], {})
    g.add_node("i_sw", "Switch", ["i_merge", "cond"], {"T": I32})
    g.add_node("acc_sw", "Switch", ["acc_merge", "cond"], {"T": F})
    g.add_node("one", "Const", ["^i_sw"], {"dtype": I32, "value": np.int32(1)})
    g.add_node("i_add", "AddV2", ["i_sw:1", "one"], {"T": I32})
    g.add_node("acc_add", "AddV2", ["acc_sw:1", "v_enter"], {"T": F})
    g.add_node("neg", "Neg", ["acc_sw:1"], {"T": F})  # single input, dead at the end
    g.add_node("trig", "ControlTrigger", ["^neg"], {})  # runs even when neg is dead
    g.add_node("i_next", "NextIteration", ["i_add"], {"T": I32})
    g.add_node("acc_next", "NextIteration", ["acc_add", "^trig"], {"T": F})
    g.add_node("i_exit", "Exit", ["i_sw"], {"T": I32})
    g.add_node("acc_exit", "Exit", ["acc_sw"], {"T": F})
    return g


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("n", [0, 1, 4])
def test_loop_reading_a_reference_variable(fast_path, n):
    sess = Session(_loop_over_variable(), fast_path=fast_path)
    sess.run(None, targets="init")
    acc, i = sess.run(["acc_exit", "i_exit"], {"n": n})
    np.testing.assert_allclose(acc, n * np.array([1.5, -2], np.float32))
    assert i == n


def test_uninitialized_variable_read_by_an_enter_names_the_enter():
    with pytest.raises(TfgRuntimeError, match=r"'v_enter' \(Enter\).*uninitialized"):
        Session(_loop_over_variable()).run("acc_exit", {"n": 2})


def test_plan_marks_only_ref_inputs_for_reading():
    plan = build_plan(list(_loop_over_variable()), DeviceSet.from_spec("cpu:1").default,
                      fetches=[])
    by_name = {it.name: it for it in plan.items}
    # The Enter's declared type is float (not float_ref): it reads the Ref, AddV2 gets arrays.
    assert by_name["acc_add"].deref is None
    assert by_name["less"].deref is None
    # Assign takes its variable by reference, so nothing is read for it either.
    assert by_name["init"].deref is None
    assert by_name["acc_merge"].succ and all(len(e) == 6 for e in by_name["acc_merge"].succ)


def test_ref_through_a_ref_enter_is_read_by_the_kernel():
    g = Graph()
    g.add_node("v", "VariableV2", [], {"dtype": F, "shape": Shape(())})
    g.add_node("v0", "Const", [], {"dtype": F, "value": np.float32(3)})
    g.add_node("init", "Assign", ["v", "v0"], {"T": F})
    g.add_node("p", "Placeholder", [], {"dtype": B, "shape": Shape(())})
    g.add_node("sw", "RefSwitch", ["v", "p"], {"T": DType.FLOAT_REF})
    g.add_node("y", "Neg", ["sw:1"], {"T": F})
    sess = Session(g)
    sess.run(None, targets="init")
    assert sess.run("y", {"p": True}) == -3.0
    plans = [p for prepared in sess._cache.values() for p in prepared.plans]
    assert [it.deref for p in plans for it in p.items if it.name == "y"] == [(0,)]
    with pytest.raises(TfgRuntimeError, match="dead"):
        sess.run("y", {"p": False})


def test_views_and_lookups_never_go_to_the_pool():
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((512, 512))})
    g.add_node("i", "Const", [], {"dtype": I32, "value": np.int32(3)})
    g.add_node("ax", "Const", [], {"dtype": I32, "value": np.int32(0)})
    g.add_node("row", "GatherV2", ["x", "i", "ax"], {"Tparams": F, "Tindices": I32,
                                                    "Taxis": I32})
    g.add_node("t", "Tanh", ["x"], {"T": F})
    g.add_node("mm", "MatMul", ["x", "x"], {"T": F})
    plan = build_plan(list(g), DeviceSet.from_spec("cpu:1").default)
    pool = {it.name: it.poolable for it in plan.items if it.kind == "kernel"}
    assert pool["row"] is False and pool["mm"] is False and pool["t"] is True


@pytest.mark.parametrize("op,inputs", [("Enter", []), ("Switch", ["c"])])
def test_malformed_builtin_fails_naming_the_node(op, inputs):
    g = Graph()
    g.add_node("c", "Const", [], {"dtype": F, "value": np.float32(1)})
    attrs = {"T": F, "frame_name": b"L"} if op == "Enter" else {"T": F}
    g.add_node("n", op, inputs, attrs)
    g.add_node("out", "Exit" if op == "Enter" else "Identity", ["n"], {"T": F})
    # Refused before running (Session checks control flow, tfg/graphdef/validate.py);
    # the executor's own check (a TfgRuntimeError naming the node) stays for workers.
    with pytest.raises(GraphValidationError, match=rf"'n' \({op}\)"):
        Session(g).run("out")
