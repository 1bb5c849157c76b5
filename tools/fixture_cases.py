"""What the op-fixture generators (tools/gen_*_fixtures.py) share: where a fixture folder
lies, a set of cases run in one tf.compat.v1 Session and written as `.pb` + `.npz` +
cases.json, and a folder's arrays recorded case by case into one `.npz`.

NEEDS TENSORFLOW and never imports tfg, like the generators. Import it after the generator's
own `import tensorflow`, so that the TF_CPP_MIN_LOG_LEVEL it sets first still holds.

A case set's layout (gen_math_more, gen_linalg_more and gen_sparse; tests/op_cases.py reads
it back): `<stem>.pb`, the one graph every case is built in under its own name scope;
`<stem>.npz`, the feeds `<case>/<arg>` and TensorFlow's values under the fetches' keys
(`<case>/...`); cases.json, one dict a case with at least `name`, `args` and `error` (the
words TensorFlow's kernel refuses the feeds with, or None).
"""
import json
import os

import numpy as np
import tensorflow as tf

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")


def fixture_dir(name):
    """tests/fixtures/<name>, spelled as the generators always printed it."""
    return os.path.join(FIXTURES, name)


class CaseSet:
    """The cases of one fixture graph. A generator subclasses it with an `add` that builds a
    case under tf.name_scope(name), fills `arrays` with its feeds and `fetches` with the
    tensors TensorFlow's values are wanted of, and appends its entry to `index`."""

    # The errors that count as TensorFlow refusing a case's feeds (a subclass may add, e.g.
    # the CTC decoders' FailedPrecondition).
    refusals = (tf.errors.InvalidArgumentError,)

    def __init__(self):
        self.index, self.arrays, self.fetches = [], {}, {}

    def feeds(self, graph, case):
        """The case's placeholders (`<case>/<arg>:0`) -> their arrays."""
        return {graph.get_tensor_by_name(f"{case['name']}/{k}:0"):
                self.arrays[f"{case['name']}/{k}"] for k in case["args"]}

    def run(self, graph):
        """Run every case in one Session and keep its fetches' values; a case with an
        `error` must be refused by TensorFlow's kernel with those words (and keeps none).
        Every case runs before a mismatch fails the generator, all of them listed."""
        bad = []
        with tf.compat.v1.Session(graph=graph) as sess:
            self.prepare(sess, graph)
            for case in self.index:
                name = case["name"]
                keys = [k for k in self.fetches if k.startswith(name + "/")]
                try:
                    values = sess.run([self.fetches[k] for k in keys], self.feeds(graph, case))
                except self.refusals as e:
                    if not (case["error"] and case["error"] in e.message):
                        bad.append((name, e.message.splitlines()[-2:]))
                    continue
                if case["error"]:
                    bad.append((name, "TensorFlow raised no error"))
                self.arrays.update(zip(keys, values))
        assert not bad, "\n".join(map(str, bad))

    def prepare(self, sess, graph):
        """Run once in the Session before the cases (e.g. a table initializer); none here."""

    def write(self, out, stem, graph):
        """out/<stem>.pb, out/<stem>.npz and out/cases.json."""
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{stem}.pb"), "wb") as f:
            f.write(graph.as_graph_def().SerializeToString())
        np.savez_compressed(os.path.join(out, f"{stem}.npz"), **self.arrays)
        with open(os.path.join(out, "cases.json"), "w") as f:
            json.dump(self.index, f, indent=1)
            f.write("\n")
        print(out, len(self.index), "cases,", len(self.arrays), "arrays")


def generate(cases, makers, out, stem):
    """Build each maker(cases)'s cases in one new graph, run them all and write the set."""
    graph = tf.Graph()
    with graph.as_default():
        for make in makers:
            make(cases)
    cases.run(graph)
    cases.write(out, stem, graph)


def write_arrays(out, filename, makers):
    """Call each maker(arrays) in turn (each records its cases under `<case>/...` keys in the
    one dict) and write them all to out/filename, compressed."""
    os.makedirs(out, exist_ok=True)  # first: a maker may write files of its own there
    arrays = {}
    for make in makers:
        make(arrays)
    np.savez_compressed(os.path.join(out, filename), **arrays)
    print(out, len(arrays), "arrays")
