"""`tfg --help` and `tfg --version` start without numpy (issue 15, item 6): they only print."""
import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_and_version_do_not_import_numpy(args):
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfg", *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                if line.startswith("import time:")}
    assert "numpy" not in imported
    assert "google.protobuf" not in imported
    assert "tfg" in p.stdout or "0." in p.stdout


def test_public_names_still_resolve():
    import tfg

    assert tfg.Graph.__name__ == "Graph" and callable(tfg.load) and tfg.DType.FLOAT
    assert {"Graph", "load", "save", "Session"} <= set(dir(tfg))
