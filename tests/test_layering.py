"""Imports go down DESIGN.md's layers and never in a circle (docs/architecture.md).

The import graph is read from the source with `ast`: imports at module top and inside
functions alike, since a lazy import is still a dependency. Layers, bottom up:

    errors, schemas  <-  graphdef  <-  kernels, passes, render, tensorboard  <-  executor  <-  cli

A package may import its own modules and the packages its row of ALLOWED names. The few
exceptions are listed below with the reason each is there.
"""
import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tfg"

# package -> the packages it may import (besides itself). `tfg` is the package's own facade
# (tfg/__init__.py, tfg/builder.py, tfg/__main__.py).
ALLOWED = {
    "errors": set(),
    "schemas": {"errors"},
    "graphdef": {"errors", "schemas"},
    "kernels": {"errors", "schemas"},
    "passes": {"errors", "schemas", "graphdef", "kernels"},
    "render": {"errors", "schemas", "graphdef"},
    "tensorboard": {"errors", "schemas", "graphdef"},
    "executor": {"errors", "schemas", "graphdef", "kernels", "passes"},
    "cli": {"errors", "schemas", "graphdef", "kernels", "passes", "render", "tensorboard",
            "executor", "tfg"},
    "tfg": {"errors", "schemas", "graphdef", "kernels", "passes", "render", "tensorboard",
            "executor", "cli"},
}

# Circles allowed, each with why it is there (module names sorted).
ALLOWED_CIRCLES = {
    # The kernel registry imports the package on the first lookup, which registers every
    # kernel module; `tfg --help` and graph-only commands then never import the kernels.
    ("tfg.kernels", "tfg.kernels.registry"):
        "lazy registration of the kernel modules on first lookup",
}


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")
            if "proto" not in p.relative_to(PACKAGE).parts}


def _resolve(name, modules):
    """The module an imported name lives in (`tfg.a.b.func` -> `tfg.a.b`)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph():
    """{module: {imported tfg module: first line}} over every import statement."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = name.split(".")
                    parent = parent[:len(parent) - node.level + (1 if is_package else 0)]
                    base = ".".join(parent + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                if not target.startswith("tfg"):
                    continue
                found = _resolve(target, modules)
                if found and found != name:
                    edges.setdefault(found, node.lineno)
                    # Importing a.b.c runs package a.b's __init__ first, unless the importer
                    # sits inside a.b (then a.b is already being initialized).
                    for pkg in _packages_above(found):
                        if pkg in modules and not (name + ".").startswith(pkg + "."):
                            edges.setdefault(pkg, node.lineno)
    return graph


def _packages_above(module):
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts))]


def _package(module):
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("builder", "__main__"):
        return "tfg"
    return parts[1]


def test_imports_go_down_the_layers():
    wrong = []
    for module, edges in sorted(import_graph().items()):
        mine = _package(module)
        for target, line in sorted(edges.items()):
            theirs = _package(target)
            if theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{module}:{line} imports {target} ({mine} may not import {theirs})")
    assert not wrong, "upward imports:\n" + "\n".join(wrong)


def test_no_import_circles():
    g = nx.DiGraph()
    for module, edges in import_graph().items():
        g.add_node(module)
        g.add_edges_from((module, target) for target in edges)
    circles = [tuple(sorted(c)) for c in nx.strongly_connected_components(g) if len(c) > 1]
    unexpected = [c for c in circles if c not in ALLOWED_CIRCLES]
    assert not unexpected, "import circles:\n" + "\n".join(" <-> ".join(c) for c in unexpected)
    stale = [c for c in ALLOWED_CIRCLES if c not in circles]
    assert not stale, f"listed circles that no longer exist (remove them): {stale}"


def test_every_package_has_a_layer():
    assert {_package(m) for m in _modules()} <= set(ALLOWED)


def test_the_graph_sees_imports_inside_functions():
    # Guards the test itself: a lazy import is a dependency too.
    edges = import_graph()["tfg.executor.partitions"]
    assert "tfg.passes.partition" in edges  # imported inside `executable_graph`


def function_level_imports():
    """["path:line: import"] of every import inside a function without a `# lazy: why` comment
    on its line or in the comment lines right above it."""
    found = []
    for path in sorted(_modules().values()):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                said, above = lines[node.lineno - 1], node.lineno - 2
                while above >= 0 and lines[above].strip().startswith("#"):  # comment above
                    said, above = lines[above] + said, above - 1
                if "# lazy" not in said:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                                 f"{lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def test_imports_inside_functions_say_why():
    # DESIGN.md: imports at module top. An import inside a function is for startup time (the
    # CLI loads a subcommand only when it runs; gRPC, CuPy, Graphviz only when used) or an
    # optional dependency, and says so in a `# lazy: why` comment.
    found = function_level_imports()
    assert not found, ("imports inside functions without a `# lazy: why` comment (move them to "
                       "the module top, or say why they wait):\n" + "\n".join(found))


def test_help_imports_no_numpy():
    # `tfg --help` lists the subcommands without importing any of them, so it starts fast.
    code = ("import sys; from click.testing import CliRunner; from tfg.cli import cli; "
            "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('numpy', 'google.protobuf') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
