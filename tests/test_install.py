"""A plain (non-editable) install works: the wheel's `tfg` console script, in a fresh venv, runs
the README's quick start and a pipe of subcommands.

Editable installs, `python -m tfg` and click's CliRunner all import more of the standard
library before tfg runs (importlib.util among them), which once hid a crash of every
subcommand of the installed script. So this test builds the wheel, installs it into a new
venv with nothing else of tfg's, and calls that venv's `bin/tfg` directly. The venv reaches
tfg's dependencies through a path entry to this interpreter's site-packages (a plain `.pth`
line, which loads no import hooks), so no network is needed.
"""
import shutil
import site
import subprocess
import sys
import sysconfig

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git for a clean tree")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    # Build from the tracked files only, as a user's clone has them.
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(src)], check=True,
                   timeout=120)
    _copy_uncommitted(src)
    wheels = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(wheels), str(src)], check=True,
                   timeout=300, capture_output=True)
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=120)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig;print(sysconfig.get_path("
                              "'purelib'))"], check=True, capture_output=True, text=True,
                             timeout=60).stdout.strip()
    deps = [p for p in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"),
                        *site.getsitepackages()} if p]
    with open(f"{purelib}/tfg_test_deps.pth", "w") as f:
        f.write("\n".join(deps) + "\n")
    wheel = next(wheels.glob("tfg-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=300,
                   capture_output=True)
    return env_dir


def _copy_uncommitted(src):
    """Work in progress (modified and new files) too, so the test checks this tree."""
    listed = subprocess.run(["git", "ls-files", "-m", "-o", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    for rel in listed:
        path = ROOT / rel
        if path.is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / rel)


def _tfg(venv, *args, cwd, input=None):
    return subprocess.run([str(venv / "bin" / "tfg"), *map(str, args)], cwd=cwd, input=input,
                          capture_output=True, timeout=300)


def test_installed_tfg_is_the_wheel(venv, tmp_path):
    p = subprocess.run([str(venv / "bin" / "python"), "-c", "import tfg; print(tfg.__file__)"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert str(venv) in p.stdout, p.stdout


@pytest.mark.parametrize("cmd", ["run", "grad", "optimize", "partition", "info", "render",
                                 "worker", "convert", "diff", "export", "place", "prune"])
def test_every_subcommand_help(venv, tmp_path, cmd):
    p = _tfg(venv, cmd, "--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    assert b"Usage: tfg " + cmd.encode() in p.stdout


def test_quick_start_and_pipe(venv, tmp_path):
    py = venv / "bin" / "python"
    subprocess.run([str(py), str(ROOT / "examples" / "mlp" / "build.py"), "-o", "mlp.pb",
                    "--feeds", "mlp_feeds.npz"], cwd=tmp_path, check=True, timeout=120,
                   capture_output=True)
    p = _tfg(venv, "run", "mlp.pb", "--feeds", "mlp_feeds.npz", "--init", "init", "--target",
             "train", "--steps", "50", "--fetch", "loss", "--fetch", "accuracy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    lines = dict(line.split(" = ", 1) for line in p.stdout.decode().splitlines())
    assert float(lines["accuracy"].split("(")[1].split(",")[0]) == 1.0

    tfg = str(venv / "bin" / "tfg")
    pipe = (f"{tfg} grad mlp.pb --ys loss --xs w1/read,w2/read | {tfg} optimize - --keep "
            f"loss,grad/w1/read,init | {tfg} partition - --devices cpu:2 | {tfg} run - "
            f"--devices cpu:2 --feeds mlp_feeds.npz --init init --fetch grad/w1/read -o g.npz")
    p = subprocess.run(["bash", "-o", "pipefail", "-c", pipe], cwd=tmp_path, capture_output=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    import numpy as np
    g = np.load(tmp_path / "g.npz")["grad/w1/read"]
    assert g.shape == (4, 8) and np.isfinite(g).all() and np.abs(g).max() > 0
