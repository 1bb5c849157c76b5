"""The docs cannot rot: every fenced ```sh / ```bash / ```console block of README.md and
docs/*.md runs, in order, in one temp dir per page, with this checkout's `tfg` on PATH.

Conventions (see docs/cli-contract.md, "Docs conventions"):
- `<!-- no-test -->` on the line before a block skips it; only for what CI lacks (TensorFlow,
  a GPU, network installs, a long-running server a person stops with Ctrl-C).
- `<!-- file: NAME -->` before a ```python block writes the block to NAME in the page's temp
  dir (later shell blocks run it), so a script shown in the docs is the script that runs.
- ```console blocks: lines starting with `$ ` are commands (a trailing `\\` continues them);
  the other lines are sample output and are not compared.
- The page's temp dir has `examples/` (a link to this checkout's), so pages can start from
  `python3 examples/mlp/build.py ...` as a reader in a checkout would.
Every block runs under `bash -euo pipefail`; a failing command fails the test with the
block, its output and the page's line number.

Also: every option of every subcommand appears on that subcommand's page.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))
SHELL_LANGS = {"sh", "bash", "console", "shell"}
_FENCE = re.compile(r"^(\s*)```+\s*([\w+-]*)")
_MARK = re.compile(r"<!--\s*(no-test|file:\s*(\S+))\s*-->")


def extract_blocks(text):
    """[(line number, language, code, mark)] of the fenced blocks in a markdown text; mark is
    None, 'no-test' or ('file', NAME) from a comment on the line before the fence."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mk = _MARK.search(prev)
        mark = None
        if mk:
            mark = "no-test" if mk.group(1) == "no-test" else ("file", mk.group(2))
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            i += 1
        blocks.append((start, lang, "\n".join(body) + "\n", mark))
        i += 1
    return blocks


def console_commands(code):
    """The commands of a ```console block (`$ ` lines and their `\\` continuations)."""
    out, cont = [], False
    for line in code.splitlines():
        if cont:
            out.append(line)
        elif line.startswith("$ "):
            out.append(line[2:])
        else:
            continue
        cont = line.rstrip().endswith("\\")
    return "\n".join(out) + "\n"


def _shims(bin_dir):
    """`tfg` and `python3` on PATH that run this checkout with this interpreter."""
    bin_dir.mkdir()
    for name, line in (("tfg", f'exec "{sys.executable}" -m tfg "$@"'),
                       ("python3", f'exec "{sys.executable}" "$@"'),
                       ("python", f'exec "{sys.executable}" "$@"')):
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + line + "\n")
        path.chmod(0o755)


def run_page(page, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _shims(tmp_path / "bin")
    os.symlink(ROOT / "examples", work / "examples")
    env = dict(os.environ)
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    env.pop("TFG_DEBUG", None)
    ran = 0
    for line, lang, code, mark in extract_blocks(page.read_text()):
        if mark == "no-test":
            continue
        if isinstance(mark, tuple):
            (work / mark[1]).write_text(code)
            continue
        if lang not in SHELL_LANGS:
            continue
        script = console_commands(code) if lang == "console" else code
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                           capture_output=True, timeout=300)
        if p.returncode != 0:
            pytest.fail(f"{page.relative_to(ROOT)}:{line}: block exited {p.returncode}\n"
                        f"--- block\n{script}--- stdout\n{p.stdout.decode(errors='replace')}"
                        f"--- stderr\n{p.stderr.decode(errors='replace')}")
        ran += 1
    return ran


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_blocks_run(page, tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    if page.name != "README.md" and "render" in page.read_text() and shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    run_page(page, tmp_path)


def test_docs_exist_and_link():
    expected = {"getting-started.md", "python-api.md", "file-formats.md", "cli-contract.md"}
    names = {p.name for p in DOCS.glob("*.md")}
    assert expected <= names
    from tfg.cli import SUBCOMMANDS

    for cmd in SUBCOMMANDS:
        assert f"{cmd}.md" in names, f"docs/{cmd}.md is missing"
    index = (DOCS / "README.md").read_text()
    for name in names - {"README.md"}:
        assert f"({name})" in index, f"docs/README.md does not link {name}"
    for page in DOCS.glob("*.md"):  # relative links resolve
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def _options(command):
    import click

    opts = []
    for param in command.params:
        if isinstance(param, click.Option) and "--help" not in param.opts:
            opts.append(max(param.opts, key=len))
    return opts


def test_every_flag_is_documented():
    from click.testing import CliRunner  # noqa: F401 - ensures click is importable
    import click

    from tfg.cli import cli

    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        text = (DOCS / f"{name}.md").read_text()
        commands = [command]
        if isinstance(command, click.Group):
            commands = [command.get_command(ctx, sub) for sub in command.list_commands(ctx)]
        for c in commands:
            for opt in _options(c):
                assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text), \
                    f"docs/{name}.md does not document {opt}"


def test_extract_blocks_conventions():
    text = ("intro\n<!-- no-test -->\n```sh\npip install tfg\n```\n\n<!-- file: a.py -->\n"
            "```python\nprint(1)\n```\n```console\n$ tfg info \\\n  g.pb\nnodes: 3\n$ ls\n```\n")
    blocks = extract_blocks(text)
    assert [(b[1], b[3]) for b in blocks] == [("sh", "no-test"), ("python", ("file", "a.py")),
                                             ("console", None)]
    assert console_commands(blocks[2][2]) == "tfg info \\\n  g.pb\nls\n"


def test_ci_runs_the_readme_test_command():
    """.ci/run calls the README's test command (plus -x and a timeout), so the command a reader
    copies is the one CI proves."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Tests"):]
    block = next(code for _, lang, code, _ in extract_blocks(section) if lang in SHELL_LANGS)
    readme_cmd = block.strip().split("&&")[-1].strip()
    assert readme_cmd.startswith("python3 -m pytest"), readme_cmd
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line.startswith(readme_cmd + " ") or line == readme_cmd for line in ci), \
        f"{readme_cmd!r} not in .ci/run"
