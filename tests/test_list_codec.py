"""TensorLists between tasks (tfg/kernels/list_codec.py): a list is a DT_VARIANT TensorProto the
way TensorFlow encodes one; lists TensorFlow serialized decode to its values (and tfg writes
the same metadata bytes); TensorFlow decodes what tfg writes (TFG_TF_PYTHON); corrupt bytes
are refused; a Keras LSTM whose loop is split so that its lists cross tasks runs on two
`tfg worker`s (`tfg partition --cluster` + `tfg run --cluster`) and in the cpu:3 pipeline
with TensorFlow's values."""
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgRuntimeError
from tfg.executor.distributed import rpc
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.canonical import canonicalize
from tfg.kernels import list_codec as lc
from tfg.kernels.list_ops import TensorList
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import tensor_pb2

DIR = FIXTURES / "functional"
TF_LISTS = np.load(DIR / "tensor_lists.npz")
EXPECTED = np.load(DIR / "expected.npz")
F32 = DType.FLOAT
TYPE = "tensorflow::TensorList"


def _tf_proto(name):
    return tensor_pb2.TensorProto.FromString(TF_LISTS[f"{name}/bytes"].tobytes())


def _stack(lst):
    return np.stack(lst.items)


def _same(a, b):
    assert type(a) is type(b)
    if not isinstance(a, TensorList):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
        return
    assert (a.element_dtype, a.element_shape, a.max_num_elements, len(a)) == \
        (b.element_dtype, b.element_shape, b.max_num_elements, len(b))
    for x, y in zip(a.items, b.items):
        assert (x is None) == (y is None)
        if x is not None:
            _same(x, y)


# --- the codec ----------------------------------------------------------------------------
@pytest.mark.parametrize("lst", [
    TensorList(F32, (None, 2), [np.ones((3, 2), np.float32), None, np.zeros((1, 2), np.float32)]),
    TensorList(DType.INT64, None, [], 7),
    TensorList(DType.INT32, (3,), [None, None]),
    TensorList(DType.STRING, (), [np.array(b"ab", object), np.array(b"", object)]),
    TensorList(DType.VARIANT, None, [TensorList(F32, (2,), [np.arange(2, dtype=np.float32)]),
                                     None, TensorList(DType.BOOL, None, [np.array([True])])]),
], ids=["unset_items", "empty_max7", "all_unset", "strings", "list_of_lists"])
def test_round_trip(lst):
    proto = lc.to_proto(lst)
    assert proto.dtype == DType.VARIANT and proto.variant_val[0].type_name == TYPE
    _same(lc.from_proto(tensor_pb2.TensorProto.FromString(proto.SerializeToString())), lst)
    # through the RecvTensor chunks and the RunGraph feed/fetch encoding
    _same(rpc.assemble(rpc.tensor_chunks(lst, False))[0], lst)
    _same(rpc.decode(rpc.encode(lst)), lst)



def test_lists_tensorflow_serialized():
    reserved = lc.from_proto(_tf_proto("reserved"))
    assert (reserved.element_dtype, reserved.element_shape, len(reserved),
            reserved.max_num_elements) == (F32, (None, 2), 3, -1)
    assert reserved.items[1] is None
    want = TF_LISTS["reserved/stacked"]  # TensorFlow's stack: the unset item as zeros
    np.testing.assert_array_equal(reserved.items[0], want[0])
    np.testing.assert_array_equal(reserved.items[2], want[2])
    assert not want[1].any()
    pushed = lc.from_proto(_tf_proto("pushed"))
    assert (pushed.element_dtype, pushed.element_shape, pushed.max_num_elements) == \
        (DType.INT32, (3,), 5)
    np.testing.assert_array_equal(_stack(pushed), TF_LISTS["pushed/stacked"])
    nested = lc.from_proto(_tf_proto("nested"))
    assert nested.element_dtype == DType.VARIANT and nested.element_shape is None
    _same(nested.items[0], reserved)
    np.testing.assert_array_equal(_stack(nested.items[1]), TF_LISTS["nested/stacked"])
    # tfg writes TensorFlow's metadata bytes (dtype, max length, unset indices, shape)
    for name, lst in (("reserved", reserved), ("pushed", pushed), ("nested", nested)):
        assert lc.to_proto(lst).variant_val[0].metadata == \
            lc._variant_value(_tf_proto(name)).metadata


def _corrupt(metadata=None, type_name=TYPE, tensors=(), content=None):
    p = lc.to_proto(TensorList(F32, (2,), [np.ones(2, np.float32), None]))
    var = p.variant_val[0]
    if metadata is not None:
        var.metadata = metadata
    var.type_name = type_name
    if tensors:
        del var.tensors[:]
        for t in tensors:
            var.tensors.add().CopyFrom(t)
    if content is not None:
        p.ClearField("variant_val")
        p.tensor_content = content
    return p


@pytest.mark.parametrize("proto, msg", [
    (_corrupt(metadata=b"\x01"), "truncated varint"),
    (_corrupt(metadata=b"\x01\x05\x01\xff"), "unset item index 5 out of order or range"),
    (_corrupt(metadata=b"\x80"), "truncated varint"),
    (_corrupt(metadata=b"\xff\xff\xff\x7f"), "unset items in 4 bytes"),
    (_corrupt(type_name="tensorflow::Tensor"), "variant of type 'tensorflow::Tensor'"),
    (_corrupt(tensors=[rpc.encode(np.array([1, 2], np.int32))]), "item 0 is int32"),
    (_corrupt(content=b"\x05abc"), "declares 5 bytes, holds 3"),
])
def test_corrupt_lists_are_refused(proto, msg):
    with pytest.raises(TfgRuntimeError, match=msg):
        lc.from_proto(proto)


def test_tensorflow_decodes_what_tfg_writes(tmp_path):
    py = os.environ.get("TFG_TF_PYTHON")
    if not py or subprocess.run([py, "-c", "import tensorflow"], capture_output=True,
                                timeout=120).returncode:
        pytest.skip("needs TensorFlow (TFG_TF_PYTHON)")
    lst = TensorList(F32, (None, 2), [np.full((2, 2), 3, np.float32), None,
                                      np.arange(4, dtype=np.float32).reshape(2, 2)], 9)
    path = tmp_path / "list.pb"
    path.write_bytes(lc.to_proto(lst).SerializeToString())
    script = (
        "import sys, numpy as np, tensorflow as tf\n"
        "v = tf.io.parse_tensor(open(sys.argv[1], 'rb').read(), out_type=tf.variant)\n"
        "r = tf.raw_ops\n"
        "s = r.TensorListStack(input_handle=v, element_shape=-1, element_dtype=tf.float32)\n"
        "n = r.TensorListLength(input_handle=v)\n"
        "e = r.TensorListElementShape(input_handle=v, shape_type=tf.int32)\n"
        "np.savez(sys.argv[2], s=s.numpy(), n=n.numpy(), e=e.numpy())\n")
    out = tmp_path / "tf.npz"
    p = subprocess.run([py, "-c", script, str(path), str(out)], capture_output=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    with np.load(out) as got:
        np.testing.assert_array_equal(got["s"], np.stack([lst.items[0], np.zeros((2, 2)),
                                                          lst.items[2]]))
        assert int(got["n"]) == 3 and got["e"].tolist() == [-1, 2]


# --- a Keras LSTM whose lists cross tasks and devices ---------------------------------------
def _split_lstm():
    """The LSTM fixture (functional While loops) with every TensorList op pinned to task 1 and
    everything else to task 0: each iteration sends lists between the tasks both ways."""
    g = canonicalize(io.load(str(DIR / "lstm_while.pb")))
    for n in g:
        n.device = "/job:worker/task:1" if n.op.startswith("TensorList") else \
            "/job:worker/task:0"
    return g


def test_keras_lstm_lists_cross_tasks_cli(tmp_path):
    pinned, x, out = tmp_path / "g.pb", tmp_path / "x.npy", tmp_path / "out.npz"
    io.save(_split_lstm(), str(pinned))
    np.save(x, EXPECTED["lstm_while/x"])
    with LocalCluster(2) as cluster:
        part = tfg_cli("partition", pinned, "--cluster", cluster.spec).stdout
        crossing = [n for n in io.loads(part) if n.op == "_Send"
                    and n.get_attr("T") == DType.VARIANT
                    and "task:0" in n.get_attr("send_device").decode()
                    and "task:1" in n.get_attr("recv_device").decode()]
        assert crossing  # lists really travel between the tasks
        tfg_cli("run", "-", "--cluster", cluster.spec, "--feed", f"x=@{x}", "--fetch",
                "Identity", "-o", out, input=part)
        # a graph with the While still in it: the master canonicalizes, places, partitions
        plain = tmp_path / "plain.npz"
        tfg_cli("run", DIR / "lstm_while.pb", "--cluster", cluster.spec, "--feed",
                f"x=@{x}", "--fetch", "Identity", "-o", plain)
    for path in (out, plain):
        with np.load(path) as got:
            np.testing.assert_allclose(got["Identity"], EXPECTED["lstm_while/y"], rtol=1e-5,
                                       atol=1e-6)


def test_keras_lstm_pipeline_cpu3(tmp_path):
    """tfg grad | tfg optimize | tfg partition --devices cpu:3 | tfg run --devices cpu:3 on
    the functional LSTM: the output as TensorFlow computed it, the gradient as an unpartitioned
    session computes it."""
    x = tmp_path / "x.npy"
    np.save(x, EXPECTED["lstm_while/x"])
    g = tfg_cli("grad", DIR / "lstm_while.pb", "--ys", "Identity", "--xs", "x").stdout
    g = tfg_cli("optimize", "-", "--keep", "Identity,grad/x", input=g).stdout
    part = tfg_cli("partition", "-", "--devices", "cpu:3", input=g).stdout
    assert sum(n.op == "_Send" and n.get_attr("T") == DType.VARIANT
               for n in io.loads(part)) > 0  # lists cross devices
    out = tmp_path / "out.npz"
    tfg_cli("run", "-", "--devices", "cpu:3", "--feed", f"x=@{x}", "--fetch", "Identity",
            "--fetch", "grad/x", "-o", out, input=part)
    want_grad = Session(io.loads(g)).run("grad/x", {"x": EXPECTED["lstm_while/x"]})
    with np.load(out) as got:
        np.testing.assert_allclose(got["Identity"], EXPECTED["lstm_while/y"], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(got["grad/x"], want_grad, rtol=1e-5, atol=1e-7)
        assert np.abs(want_grad).max() > 0.01

