"""DepthToSpace / SpaceToDepth in NCHW (TensorFlow's CPU kernels take NHWC only, so the
TensorFlow fixtures in tests/fixtures/real_ops cover NHWC): NCHW must equal the NHWC result
transposed, and each op must undo the other; plus the bad-input errors."""
import numpy as np
import pytest

from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType


def _run(op, x, **attrs):
    g = Graph()
    g.add_node("x", "Const", attrs={"dtype": DType.FLOAT, "value": x})
    g.add_node("op", op, ["x:0"], {"T": DType.FLOAT, **attrs})
    return Session(g).run(["op:0"], {})[0]


@pytest.mark.parametrize("op,shape", [("DepthToSpace", (2, 3, 2, 12)),
                                      ("SpaceToDepth", (2, 6, 9, 2))])
def test_nchw_is_nhwc_transposed(op, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    bs = 2 if op == "DepthToSpace" else 3
    nhwc = _run(op, x, block_size=bs)
    nchw = _run(op, np.ascontiguousarray(x.transpose(0, 3, 1, 2)), block_size=bs,
                data_format=b"NCHW")
    np.testing.assert_array_equal(nchw, nhwc.transpose(0, 3, 1, 2))
    back = _run("SpaceToDepth" if op == "DepthToSpace" else "DepthToSpace", nhwc,
                block_size=bs)
    np.testing.assert_array_equal(back, x)


def test_bad_inputs_are_errors():
    with pytest.raises(TfgError, match="divisible by block_size"):
        _run("SpaceToDepth", np.zeros((1, 5, 4, 1), np.float32), block_size=2)
    with pytest.raises(TfgError, match="not supported"):
        _run("DepthToSpace", np.zeros((1, 2, 2, 4), np.float32), block_size=2,
             data_format=b"NCHW_VECT_C")
