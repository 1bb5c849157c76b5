"""A graph whose static shapes conflict is an input error (exit 2), as TensorFlow's importer
refuses it; a kernel that fails on values the shapes cannot foresee stays a run-time failure
(exit 1). `tfg run` infers only after a node fails (tfg/cli/run.py `_as_input_error`)."""
import numpy as np
import pytest

from helpers import tfg_cli
from tfg import builder as tb
from tfg.executor.executor import NodeError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.decode import loads
from tfg.graphdef.infer import static_conflict


def _save(graph, tmp_path, name="g.pb"):
    path = tmp_path / name
    io.save(graph, str(path))
    return path


def _one_error_line(p):
    err = p.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _const(name, shape):
    dims = " ".join(f"dim {{ size: {d} }}" for d in shape)
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}'
            f' attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ {dims} }}'
            ' float_val: 1 } } } }\n')


def _const_matmul():
    """y = MatMul(Const [2, 3], Const [4, 5]): the builder refuses to make it, so as text."""
    text = (_const("a", (2, 3)) + _const("b", (4, 5))
            + 'node { name: "m" op: "MatMul" input: "a" input: "b" '
              'attr { key: "T" value { type: DT_FLOAT } } }\n'
            + 'node { name: "y" op: "Identity" input: "m" '
              'attr { key: "T" value { type: DT_FLOAT } } }\n')
    return loads(text.encode())


def test_constants_of_conflicting_shapes_exit_2_naming_the_node(tmp_path):
    p = tfg_cli("run", _save(_const_matmul(), tmp_path), "--fetch", "y", check=False)
    err = _one_error_line(p)
    assert p.returncode == 2, err
    assert "'m' (MatMul)" in err and "3 vs 4" in err


def test_a_feed_whose_shape_conflicts_statically_exits_2(tmp_path):
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [None, None], name="x")
        w = tb.constant(np.ones((4, 5), np.float32), name="w")
        tb.identity(tb.matmul(x, w, name="m"), name="y")
    path = _save(g.graph, tmp_path)
    p = tfg_cli("run", path, "--feed", "x=[[1,2,3]]", "--fetch", "y", check=False)
    err = _one_error_line(p)
    assert p.returncode == 2 and "'m' (MatMul)" in err and "arrays fed: x" in err, err
    ok = tfg_cli("run", path, "--feed", "x=[[1,2,3,4]]", "--fetch", "y")
    assert ok.returncode == 0


def test_a_failure_on_values_stays_exit_1(tmp_path):
    """Reshape to a size only the fed value decides: no static conflict, a kernel failure."""
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [None], name="x")
        shape = tb.placeholder(tb.int32, [2], name="shape")
        tb.identity(tb.reshape(x, shape, name="r"), name="y")
    path = _save(g.graph, tmp_path)
    p = tfg_cli("run", path, "--feed", "x=[1,2,3]", "--feed", "shape=[2,2]", "--fetch", "y",
                check=False)
    assert p.returncode == 1 and "'r' (Reshape)" in _one_error_line(p)


def test_static_conflict_names_only_the_failing_node():
    g = _const_matmul()
    assert "inner dimensions" in str(static_conflict(g, "m"))
    assert static_conflict(g, "y") is None and static_conflict(g, "absent") is None


def test_the_python_api_still_raises_the_kernel_error():
    with pytest.raises(NodeError, match="Matrix size-incompatible"):
        Session(_const_matmul()).run(["y"])
