"""Every registered op signature equals TensorFlow's OpDef (tests/fixtures/opdefs/opdefs.json,
written by tools/gen_opdefs.py under TensorFlow): argument names and order, how each argument
gets its dtype, attr types, defaults, allowed values, minimums and the op flags."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import all_ops, get_op
from tfg.schemas.ops.signature import input_dtypes, num_outputs, output_dtypes, ref_input_indices

OPDEFS = json.loads((FIXTURES / "opdefs" / "opdefs.json").read_text())
TF_OPS = sorted(k for k in OPDEFS if not k.startswith("_tensorflow"))
CONTROL_FLOW = {"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
                "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger",
                "_Send", "_Recv", "_HostSend", "_HostRecv"}


def _dt(name):
    return DType[name[3:]]


def _arg_matches(ours, theirs):
    assert ours.name == theirs["name"]
    assert ours.is_ref == theirs["is_ref"], ours.name
    assert ours.number_attr == theirs["number_attr"], ours.name
    assert ours.type_attr == theirs["type_attr"], ours.name
    assert ours.type_list_attr == theirs["type_list_attr"], ours.name
    assert ours.dtype == (_dt(theirs["type"]) if theirs["type"] else None), ours.name


def _default_matches(ad, d):
    kind, value = d["kind"], d["value"]
    if kind == "type":
        assert ad.default == _dt(value)
    elif kind == "s":
        assert ad.default == value.encode()
    elif kind == "f":
        assert np.float32(ad.default) == np.float32(value)
    elif kind == "shape":
        assert ad.default == (None if value is None else tuple(value))
    elif kind == "list(type)":
        assert ad.default == [_dt(v) for v in value]
    elif kind in ("list(s)",):
        assert ad.default == [v.encode() for v in value]
    else:
        assert ad.default == value


def test_every_tensorflow_op_is_registered():
    missing = [name for name in TF_OPS if name not in all_ops()]
    assert not missing


def test_no_registered_op_lacks_a_tensorflow_reference():
    # Grappler's fused ops (`_Fused*`, tfg/schemas/ops/fused.py) have no public OpDef to compare;
    # tfg's own (`_Tfg*`) are made by its Session's rewrites only, never written to a file.
    extra = sorted(n for n in set(all_ops()) - set(TF_OPS)
                   if not n.startswith(("_Fused", "_Tfg")))
    assert not extra


@pytest.mark.parametrize("name", TF_OPS)
def test_signature_equals_tensorflow(name):
    tf, sig = OPDEFS[name], get_op(name)
    assert [a.name for a in sig.inputs] == [a["name"] for a in tf["inputs"]]
    assert [a.name for a in sig.outputs] == [a["name"] for a in tf["outputs"]]
    for ours, theirs in zip(sig.inputs + sig.outputs, tf["inputs"] + tf["outputs"]):
        _arg_matches(ours, theirs)
    assert sorted(sig.attrs) == sorted(a["name"] for a in tf["attrs"])
    for a in tf["attrs"]:
        ad = sig.attrs[a["name"]]
        assert ad.type == a["type"], a["name"]
        assert ad.has_default == (a["default"] is not None), a["name"]
        if a["default"] is not None:
            _default_matches(ad, a["default"])
        if a["allowed"] is None:
            assert ad.allowed is None, a["name"]
        elif a["type"] in ("type", "list(type)"):
            assert set(ad.allowed) == {_dt(t) for t in a["allowed"]}, a["name"]
        else:
            assert [x.encode() if isinstance(x, str) else x for x in ad.allowed] == \
                [x.encode() for x in a["allowed"]], a["name"]
        assert (ad.minimum if ad.minimum is not None else None) == a["minimum"], a["name"]
    assert sig.stateful == tf["is_stateful"]
    assert sig.is_commutative == tf["is_commutative"]
    assert sig.is_aggregate == tf["is_aggregate"]
    assert (sig.control_flow is not None) == (name in CONTROL_FLOW)
    assert sig.shape_fn is not None


def _node(op, attrs, inputs=()):
    g = Graph()
    return g.add_node("n", op, list(inputs), attrs)


def test_output_dtypes_follow_type_attrs():
    assert output_dtypes(_node("ShapeN", {"N": 3, "T": DType.FLOAT})) == [DType.INT32] * 3
    assert output_dtypes(_node("Split", {"num_split": 2, "T": DType.HALF})) == [DType.HALF] * 2
    n = _node("IdentityN", {"T": [DType.FLOAT, DType.INT64]})
    assert output_dtypes(n) == [DType.FLOAT, DType.INT64]
    assert input_dtypes(n) == [DType.FLOAT, DType.INT64]
    merge = _node("Merge", {"N": 2, "T": DType.DOUBLE})
    assert output_dtypes(merge) == [DType.DOUBLE, DType.INT32]
    assert num_outputs(_node("Unpack", {"num": 4, "T": DType.FLOAT})) == 4


def test_ref_signatures():
    assert output_dtypes(_node("VariableV2", {"dtype": DType.FLOAT, "shape": (2,)})) == \
        [DType.FLOAT_REF]
    assert ref_input_indices(_node("ApplyAdam", {"T": DType.FLOAT})) == [0, 1, 2]
    assert get_op("Assign").has_ref_inputs and not get_op("AssignVariableOp").has_ref_inputs


def test_restore_outputs_come_from_a_type_list():
    n = _node("RestoreV2", {"dtypes": [DType.FLOAT, DType.INT32]})
    assert output_dtypes(n) == [DType.FLOAT, DType.INT32]
    assert input_dtypes(n) == [DType.STRING] * 3
