"""One op-fixture case set as tools/fixture_cases.py writes it (tests/fixtures/<name>:
<name>.pb, <name>.npz, cases.json), loaded once, and the checks the tests of those sets share
(tests/test_math_more_ops.py, test_linalg_more_ops.py, test_sparse_ops.py): a case's feeds,
a value against TensorFlow's, tfg's gradient and TensorFlow's own gradient graph.

Each case of the set is a dict with `name`, `args` (its placeholders `<case>/<arg>`),
`grad` (the args TensorFlow differentiated `<case>/loss` by: `<case>/d<arg>` in the npz,
`<case>/tf_d<arg>` the node of TensorFlow's own gradient graph), `rtol`, `atol` and `error`
(the words TensorFlow's kernel refused the feeds with, or None).
"""
import json

import numpy as np

from conftest import FIXTURES
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType
from tfg.graphdef.attrs import Shape


class OpCases:
    """tests/fixtures/<name>: `cases` (cases.json), `arrays` (the npz), `graph` (the .pb);
    `runs` and `errors` split the cases by whether TensorFlow refused them, `grads` is one
    (case, arg) a gradient TensorFlow took."""

    def __init__(self, name):
        self.dir = FIXTURES / name
        self.cases = json.loads((self.dir / "cases.json").read_text())
        self.arrays = dict(np.load(self.dir / f"{name}.npz"))
        self.graph = io.load(str(self.dir / f"{name}.pb"))
        self.runs = [c for c in self.cases if not c["error"]]
        self.errors = [c for c in self.cases if c["error"]]
        self.grads = [(c, k) for c in self.cases if c["grad"] for k in c["grad"]]

    def feeds(self, case):
        """The case's placeholders `<case>/<arg>:0` -> TensorFlow's feeds."""
        name = case["name"]
        return {f"{name}/{k}:0": self.arrays[f"{name}/{k}"] for k in case["args"]}

    def feeds_file(self, path, name, change=None):
        """Write case `name`'s feeds (keys `<case>/<arg>`, as `tfg run --feeds` reads them)
        to the .npz `path`, with `change` ({key: array}) applied; returns the case."""
        case = next(c for c in self.cases if c["name"] == name)
        args = {f"{name}/{k}": self.arrays[f"{name}/{k}"] for k in case["args"]}
        args.update(change or {})
        np.savez(path, **args)
        return case

    def check_tfg_gradient(self, case, arg):
        """tfg's gradient pass on the case's loss, run, against tf.gradients' value."""
        name = case["name"]
        g2 = grad(self.graph, [f"{name}/loss"], [f"{name}/{arg}"])
        got = Session(g2).run([f"grad/{name}/{arg}:0"], self.feeds(case))[0]
        check(got, self.arrays[f"{name}/d{arg}"], case, f"{name} d{arg}")

    def check_tf_gradient_graph(self, session, case, arg):
        """The gradient graph TensorFlow itself emitted, run by tfg (`session` on the set's
        graph), against TensorFlow's value of it."""
        name = case["name"]
        got = session.run([f"{name}/tf_d{arg}:0"], self.feeds(case))[0]
        check(got, self.arrays[f"{name}/d{arg}"], case, f"{name} tf_d{arg}")


def check(got, expected, case, what, magnitude=False):
    """got is TensorFlow's `expected`: same shape and dtype, integers and booleans exactly,
    floats within the case's rtol/atol (NaN where TensorFlow has NaN), strings (an 'S' array
    in the fixture, an object array of bytes in tfg) byte for byte. magnitude: compare
    absolute values, for a vector whose sign (phase) is free."""
    got = np.asarray(got)
    assert got.shape == expected.shape, what
    if expected.dtype.kind == "S":
        assert got.dtype == object, what
        assert got.tolist() == expected.tolist(), what  # (astype("S") would drop NULs)
        return
    assert got.dtype == expected.dtype, what
    if expected.dtype.kind in "iub":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    if magnitude:
        got, expected = np.abs(got), np.abs(expected)
    np.testing.assert_allclose(got, expected, rtol=case["rtol"], atol=case["atol"],
                               equal_nan=True, err_msg=what)


def case_ids(cases):
    """pytest ids of parametrized cases: their names."""
    return [c["name"] for c in cases]


def grad_ids(grads):
    """pytest ids of parametrized (case, arg) gradients: `<case>-d<arg>`."""
    return [f"{c['name']}-d{k}" for c, k in grads]


def one_op_graph(op, inputs, attrs=None):
    """A Graph of one node "op" of type `op` on Consts (a value) or Placeholders (a tuple: the
    shape): inputs is [(value or shape, DType)], the node's inputs `in<i>:0` in order."""
    g = Graph()
    names = []
    for i, (v, dt) in enumerate(inputs):
        if isinstance(v, tuple):
            g.add_node(f"in{i}", "Placeholder", [], {"dtype": dt, "shape": Shape(v)})
        else:
            value = np.asarray(v, dtype=object if dt == DType.STRING else dt.np)
            g.add_node(f"in{i}", "Const", [], {"dtype": dt, "value": value})
        names.append(f"in{i}:0")
    g.add_node("op", op, names, attrs or {})
    return g
