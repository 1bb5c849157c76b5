"""`tfg render` and tfg.render: dot source structure always; SVG through Graphviz when `dot`
is installed (parsed with xml.etree: clusters and edges must be there)."""
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import CONFORMANCE, conformance_cases
from tfg.cli import main
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.render import to_dot
from tfg.render.view import select
from tfg.schemas.dtypes import DType

CASES = [p.name for p in conformance_cases()]
HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` is not installed")
SVG = "{http://www.w3.org/2000/svg}"


def case_graph(case):
    """Path of a shared conformance case's graph; the test skips in a clone without them."""
    if not (CONFORMANCE / case / "graph.pb").is_file():
        pytest.skip("../shared/conformance is not present")
    return CONFORMANCE / case / "graph.pb"


def load_case(case):
    return io.load(case_graph(case))


def run(argv, capsys):
    """`tfg ARGV` in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def edges(dot_text):
    return re.findall(r'^\s*"((?:[^"\\]|\\.)*)" -> "((?:[^"\\]|\\.)*)" (.*)$', dot_text, re.M)


def clusters(dot_text):
    return re.findall(r'subgraph "cluster_([^"]*)"', dot_text)


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not present")
@pytest.mark.parametrize("case", CASES)
def test_dot_of_every_conformance_graph(case, tmp_path, capsys):
    out = tmp_path / "g.dot"
    code, _, err = run(["render", CONFORMANCE / case / "graph.pb", "-o", out], capsys)
    assert code == 0, err
    text = out.read_text()
    assert text.startswith("digraph tfg {") and text.rstrip().endswith("}")
    g = load_case(case)
    if len(g) <= 200:  # drawn node by node: every edge of the graph is there
        n_edges = sum(len(n.inputs) for n in g)
        assert len(edges(text)) == n_edges
    if any(n.op == "Enter" for n in g):
        assert any(c.startswith("frame:") for c in clusters(text))


@needs_dot
@pytest.mark.skipif(not CASES, reason="../shared/conformance is not present")
@pytest.mark.parametrize("case", CASES)
def test_svg_of_every_conformance_graph(case, tmp_path, capsys):
    out = tmp_path / "g.svg"
    code, _, err = run(["render", CONFORMANCE / case / "graph.pb", "-o", out], capsys)
    assert code == 0, err
    root = ET.parse(out).getroot()
    groups = root.iter(SVG + "g")
    kinds = [g.get("class") for g in groups]
    g = load_case(case)
    assert kinds.count("node") >= len(g)  # every node drawn (plus a legend when placed)
    assert kinds.count("edge") == sum(len(n.inputs) for n in g)
    text = to_dot(g)
    assert kinds.count("cluster") == len(clusters(text)) > 0 or not clusters(text)


def test_loop_back_edges_and_frames():
    text = to_dot(load_case("nested_while"))
    back = [e for e in edges(text) if e[0].endswith("NextIteration") and e[1].endswith("Merge")]
    assert len(back) == 2
    assert all('constraint="false"' in attrs and "#d62728" in attrs for _, _, attrs in back)
    assert "frame:while/while_context" in clusters(text)
    assert "frame:while/while/while_context" in clusters(text)
    # The inner frame's cluster is nested inside the outer one.
    outer = text.index('cluster_frame:while/while_context"')
    inner = text.index('cluster_frame:while/while/while_context"')
    assert outer < inner
    assert 'label="while while/while/while_context\\n2 loop vars' in text


def test_control_edges_dashed_and_scopes():
    text = to_dot(load_case("grad_cond_0"))
    (ctrl,) = [e for e in edges(text) if e[:2] == ("cond/switch_f", "cond/add/y")]
    assert 'style="dashed"' in ctrl[2]
    assert "scope:cond/" in clusters(text)


def test_edge_labels_have_dtypes_and_shapes():
    text = to_dot(load_case("cnn_infer"))
    (e,) = [e for e in edges(text) if e[:2] == ("x", "Conv2D")]
    assert 'label="float32 [2,12,12,3]"' in e[2]
    assert 'label=' not in to_dot(load_case("cnn_infer"), labels=False).split("->", 1)[1] \
        .split("\n")[0]


def test_devices_coloured_with_a_legend():
    text = to_dot(load_case("multi_device"))
    assert '"__legend__"' in text and "/device:CPU:1" in text
    fills = dict(re.findall(r'^\s*"([^"]+)" \[.*fillcolor="(#[0-9a-f]+)"', text, re.M))
    g = load_case("multi_device")
    by_device = {}
    for n in g:
        by_device.setdefault(n.device, set()).add(fills[n.name])
    assert all(len(c) == 1 for c in by_device.values())  # one colour per device
    assert len({c.pop() for c in by_device.values()}) == len(by_device)


def test_collapsing_scopes_above_max_nodes():
    g = load_case("tf_grad_graph_mlp")
    view = select(g, max_nodes=30)
    assert view.boxes and len(view.nodes) + len(view.boxes) <= 30
    members = [m for _, ms in view.boxes.values() for m in ms]
    assert sorted(members + view.nodes) == sorted(g.node_names())
    text = to_dot(g, max_nodes=30)
    assert text.count("box3d") == len(view.boxes)
    assert all(not a.startswith("box:") or not b.startswith("box:") or a != b
               for a, b, _ in edges(text))


def synthetic(layers=40, per_layer=60):
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    prev = "x"
    for i in range(layers):
        for j in range(per_layer):
            name = f"layer_{i}/sub_{j % 3}/op_{j}"
            g.add_node(name, "Neg", [prev], attrs={"T": DType.FLOAT})
            prev = name
    return g


def test_collapsing_large_graph_keeps_within_limit():
    g = synthetic()
    view = select(g, max_nodes=200)
    units = len(view.nodes) + len(view.boxes)
    assert 41 <= units <= 200
    # Some boxes were opened: sub-scopes of a layer appear.
    assert any(p.count("/") == 2 for p, _ in view.boxes.values()) or len(view.nodes) > 1
    assert to_dot(g).count("->") == len(edges(to_dot(g)))


def test_scope_and_around(capsys, tmp_path):
    g = load_case("nested_while")
    view = select(g, scope="while/while")
    inner = {n for n in g.node_names() if n.startswith("while/while/")}
    assert set(view.nodes) - view.stubs == inner
    assert "while/Identity_1" in view.stubs  # feeds the inner loop's Enter
    view = select(g, around="tot", depth=1)
    assert set(view.nodes) - view.stubs == {"tot", "while/Exit_1"}
    assert view.stubs == {"while/Switch_1"}
    path = tmp_path / "g.pbtxt"
    io.save(g, str(path))
    code, out, _ = run(["render", path, "-o", "-", "--around", "tot", "--depth", "0"], capsys)
    assert code == 0 and '"tot"' in out and "->" in out
    for bad in (["--scope", "nope"], ["--around", "nope"], ["--scope", "a", "--around", "b"],
                ["--max-nodes", "0"]):
        code, _, err = run(["render", path, "-o", "-", *bad], capsys)
        assert code == 2 and err.count("\n") == 1 and err.startswith("tfg: error:")


def test_odd_names_are_quoted(tmp_path, capsys):
    g = Graph()
    g.add_node('we"ird\\name', "Const", attrs={"dtype": DType.FLOAT, "value": np.float32(1)})
    g.add_node("a b/<c>", "Neg", ['we"ird\\name'], attrs={"T": DType.FLOAT})
    text = to_dot(g)
    assert '"we\\"ird\\\\name" -> "a b/<c>"' in text
    if HAVE_DOT:
        from tfg.render import run_dot

        root = ET.fromstring(run_dot(text, "svg"))
        texts = [t.text for t in root.iter(SVG + "text")]
        assert 'we"ird\\name' in texts and "<c>" in texts  # labels render the names as they are


def test_bad_extension_and_missing_dot_leave_no_file(tmp_path, capsys, monkeypatch):
    src = case_graph("while_simple")
    code, _, err = run(["render", src, "-o", tmp_path / "g.jpg"], capsys)
    assert code == 2 and "svg" in err
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it
    code, _, err = run(["render", src, "-o", tmp_path / "g.svg"], capsys)
    assert code == 2 and "dot" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    code, _, _ = run(["render", src, "-o", tmp_path / "g.gv"], capsys)  # needs no binary
    assert code == 0 and (tmp_path / "g.gv").read_text().startswith("digraph")


@needs_dot
@pytest.mark.parametrize("ext, magic", [("png", b"\x89PNG"), ("pdf", b"%PDF")])
def test_png_and_pdf(ext, magic, tmp_path, capsys):
    out = tmp_path / f"g.{ext}"
    code, _, err = run(["render", case_graph("cond_simple_1"), "-o", out], capsys)
    assert code == 0, err
    assert out.read_bytes().startswith(magic)


def test_frames_fixture_renders_malformed_graph_too():
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("e", "Exit", ["x"], attrs={"T": DType.FLOAT})  # Exit without Enter
    g.add_node("u", "MyCustomOp", ["e", "missing"])
    text = to_dot(g)
    assert '"x" -> "e"' in text and '"e" -> "u"' in text and "cluster_frame" not in text


def _chain(n, name=lambda i: f"n{i}", device=""):
    g = Graph()
    g.add_node(name(0), "Placeholder", attrs={"dtype": DType.FLOAT})
    for i in range(1, n):
        g.add_node(name(i), "Neg", [name(i - 1)], attrs={"T": DType.FLOAT}, device=device)
    return g


def test_drawings_dot_cannot_lay_out_are_refused(tmp_path, capsys, monkeypatch):
    """dot segfaulted on a flat 100,000-node chain (no scopes to fold): more than
    MAX_DRAWN_NODES is an input error for svg/png/pdf, while .dot is still written."""
    import tfg.render as R

    monkeypatch.setattr(R, "MAX_DRAWN_NODES", 5)
    path = tmp_path / "g.pbtxt"
    io.save(_chain(8), str(path))
    code, _, err = run(["render", path, "-o", tmp_path / "g.svg"], capsys)
    assert code == 2 and "8 nodes" in err and err.count("\n") == 1
    assert not (tmp_path / "g.svg").exists()
    code, _, _ = run(["render", path, "-o", tmp_path / "g.dot"], capsys)
    assert code == 0


@needs_dot
def test_dot_past_its_timeout_is_one_error_line_and_no_file(tmp_path, capsys):
    path = tmp_path / "g.pbtxt"
    io.save(_chain(3), str(path))
    code, _, err = run(["render", path, "-o", tmp_path / "g.svg", "--timeout", "0.001"],
                       capsys)
    assert code == 1 and "did not finish" in err and err.count("\n") == 1
    assert not (tmp_path / "g.svg").exists()


@needs_dot
def test_strings_dot_cannot_hold_are_shortened(tmp_path, capsys):
    """A 20,000-character name (dot's quoted strings stop at 16,384) and a NUL in a device:
    dot quit early and tfg exited 1 saying nothing; both draw now, two long names apart."""
    long = lambda i: ("n" * 20_000) + str(i)  # noqa: E731
    g = _chain(3, name=long, device="/cpu:0\x00x")
    text = to_dot(g)
    assert len({name for edge in edges(text) for name in edge[:2]}) == 3  # still 3 nodes
    path = tmp_path / "g.pbtxt"
    io.save(g, str(path))
    code, _, err = run(["render", path, "-o", tmp_path / "g.svg"], capsys)
    assert code == 0, err
    assert (tmp_path / "g.svg").read_bytes().lstrip().startswith(b"<?xml")
