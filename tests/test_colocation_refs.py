"""Colocation attrs never name removed nodes after `optimize` or `prune` (TensorFlow's import
refuses them), and the colocation groups they describe survive, re-rooted at a live member."""
import numpy as np

import tfg
from tfg.graphdef.graph import Graph
from tfg.graphdef.colocation_refs import fix_colocation_refs
from tfg.schemas.dtypes import DType

F = DType.FLOAT


def _const(g, name, value=1.0, coloc=None):
    attrs = {"dtype": F, "value": np.float32(value)}
    if coloc:
        attrs["_class"] = [f"loc:@{c}".encode() for c in coloc]
    return g.add_node(name, "Const", [], attrs)


def _classes(g):
    return {n.name: n.get_attr("_class") for n in g if n.has_attr("_class")}


def test_group_naming_a_removed_node_is_rerooted():
    g = Graph()
    _const(g, "a", coloc=["gone"])
    _const(g, "b", coloc=["gone"])
    _const(g, "c", coloc=["a"])
    assert fix_colocation_refs(g)
    assert _classes(g) == {"b": [b"loc:@a"], "c": [b"loc:@a"]}


def test_valid_groups_are_left_alone():
    g = Graph()
    _const(g, "x")
    _const(g, "y", coloc=["x"])
    before = _classes(g)
    assert not fix_colocation_refs(g)
    assert _classes(g) == before


def test_lone_member_loses_the_attr_and_other_entries_stay():
    g = Graph()
    _const(g, "a", coloc=["gone"])
    g["a"].set_attr("_class", [b"loc:@gone", b"other"])
    fix_colocation_refs(g)
    assert _classes(g) == {"a": [b"other"]}


def test_optimize_and_prune_leave_no_dangling_reference():
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F})
    _const(g, "k", 2.0)
    g.add_node("folded", "Identity", ["k"], {"T": F})
    g.add_node("y", "Mul", ["x", "folded"], {"T": F, "_class": [b"loc:@folded"]})
    g.add_node("z", "Identity", ["y"], {"T": F, "_class": [b"loc:@folded"]})
    for out in (tfg.optimize(g, keep=["z"]), tfg.prune(g, fetches=["z:0"], feeds=["y:0"])):
        for node in out:
            for s in (node.get_attr("_class") if node.has_attr("_class") else []):
                assert s[len(b"loc:@"):].decode() in out, (node.name, s)


def test_malformed_class_attr_is_left_alone():
    g = Graph()
    _const(g, "a", coloc=["gone"])
    _const(g, "b")
    g["b"].set_attr("_class", 7)  # not a list of strings: validation's business, not ours
    assert fix_colocation_refs(g)
    assert g["b"].get_attr("_class") == 7 and not g["a"].has_attr("_class")
