"""The progress line (tfg/cli/progress.py): drawn on a terminal only, after a delay, never on
stdout; `tfg run --steps` and `tfg optimize` under a pseudo-terminal, piped, and with
--no-progress / --progress."""
import io
import os
import pty
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT
from test_faults import default_sigint
from tfg.cli import progress
from tfg.cli.progress import Progress, format_duration, passes_line, steps_line


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def _wait_for(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_format_duration():
    assert [format_duration(s) for s in (0, 4.6, 65, 3723)] == ["0:00", "0:05", "1:05",
                                                                "1:02:03"]


def test_steps_line_rate_eta_and_final():
    p = Progress(100, enabled=False)
    p.update(25)
    assert steps_line(p, 5.0) == "step  25/100  5.0 steps/s  ETA 0:15"
    p.update(100)
    assert steps_line(p, 20.0) == "step 100/100  5.0 steps/s  in 0:20"
    slow = Progress(10, enabled=False)
    slow.update(2)
    assert steps_line(slow, 8.0) == "step  2/10  4.00 s/step  ETA 0:32"
    resumed = Progress(100, enabled=False, start=90)  # the rate counts this process's steps
    resumed.update(95)
    assert steps_line(resumed, 1.0) == "step  95/100  5.0 steps/s  ETA 0:01"
    assert steps_line(Progress(10, enabled=False), 3.0) == "step  0/10"


def test_passes_line():
    p = Progress(0, describe=passes_line, enabled=False)
    assert passes_line(p, 0.2) == "optimize: starting  0:00"
    p.total = 16
    p.update(3, "constfold")
    assert passes_line(p, 64.0) == "pass  3/16 constfold  1:04"


def test_draws_on_a_tty_and_erases_on_close():
    out = FakeTTY()
    p = Progress(50, enabled=None, stream=out, delay=0, interval=0.01)
    p.update(7)
    assert _wait_for(lambda: "step  7/50" in out.getvalue())
    p.close()
    text = out.getvalue()
    assert text.startswith("\r") and "\n" not in text
    last = text.rsplit("\r", 2)  # "...\r<spaces>\r": the line is blanked, cursor at column 0
    assert last[-1] == "" and last[-2].strip() == "" and len(last[-2]) >= len("step  7/50")


def test_leave_keeps_the_final_line():
    out = FakeTTY()
    with Progress(3, stream=out, delay=0, interval=0.01, leave=True) as p:
        p.update(1)
        assert _wait_for(lambda: "step 1/3" in out.getvalue())
        p.update(3)
    assert re.search(r"\rstep 3/3 .* in 0:0\d *\n$", out.getvalue())


def test_silent_when_not_a_tty_or_disabled_or_short():
    pipe = io.StringIO()  # isatty() is False
    with Progress(10, stream=pipe, delay=0, interval=0.01) as p:
        assert p._thread is None
        p.update(5)
        time.sleep(0.05)
    assert pipe.getvalue() == ""
    tty = FakeTTY()
    with Progress(10, stream=tty, enabled=False, delay=0) as p:
        p.update(5)
        time.sleep(0.05)
    assert tty.getvalue() == ""
    with Progress(10, stream=tty, delay=30) as p:  # a run shorter than the delay
        p.update(10)
    assert tty.getvalue() == ""


def test_forced_on_a_pipe():
    pipe = io.StringIO()
    with Progress(10, stream=pipe, enabled=True, delay=0, interval=0.01) as p:
        p.update(4)
        assert _wait_for(lambda: "step  4/10" in pipe.getvalue())


def test_truncated_to_the_terminal_width(monkeypatch):
    monkeypatch.setattr("tfg.cli.progress._columns", lambda stream: 20)
    out = FakeTTY()
    with Progress(10, describe=lambda p, t: "x" * 50, stream=out, delay=0, interval=0.01):
        assert _wait_for(lambda: "x" in out.getvalue())
    assert "x" * 20 not in out.getvalue() and "x" * 19 in out.getvalue()


# --- end to end: the CLI with stderr on a pseudo-terminal, stdout on a pipe -------------------

def _in_pty(argv, env=None, timeout=120):
    """Run argv with stderr on a pty (stdout piped): (returncode, stdout, stderr text)."""
    master, slave = pty.openpty()
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("TFG_DEBUG", None)
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                         env=full_env, cwd=ROOT)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = p.stdout.read()
    p.stdout.close()
    p.wait(timeout=timeout)
    return p.returncode, out, b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    d = tmp_path_factory.mktemp("mlp")
    subprocess.run([sys.executable, str(ROOT / "examples/mlp/build.py"), "-o", str(d / "g.pb"),
                    "--feeds", str(d / "f.npz")], check=True, capture_output=True)
    return d


def _train(mlp, steps, *extra):
    return [sys.executable, "-m", "tfg", "run", str(mlp / "g.pb"), "--feeds",
            str(mlp / "f.npz"), "--init", "init", "--target", "train", "--fetch", "loss",
            "--steps", str(steps), *extra]


def test_run_steps_show_progress_on_a_terminal(mlp):
    rc, out, err = _in_pty(_train(mlp, 1000), env={"TFG_PROGRESS_DELAY": "0", "NO_COLOR": ""})
    assert rc == 0, err
    assert re.fullmatch(rb"loss = array\([-\d.e]+, dtype=float32\)\n", out)  # stdout: data only
    assert re.search(r"\rstep +\d+/1000 ", err)
    # the current loss, in bold on a terminal, ends the line (as a training loop prints it)
    last = float(re.search(rb"array\(([-\d.e]+)", out).group(1))
    m = re.search(r"\rstep 1000/1000  [\d.]+ (steps/s|s/step)  in \d+:\d\d  "
                  r"\x1b\[1mloss=([-\d.e]+)\x1b\[0m *\r?\n$", err)
    assert m and float(m.group(2)) == pytest.approx(last, rel=1e-3)


def test_progress_has_no_colour_with_no_color_set(mlp):
    rc, out, err = _in_pty(_train(mlp, 300), env={"TFG_PROGRESS_DELAY": "0", "NO_COLOR": "1"})
    assert rc == 0 and "loss=" in err and "\x1b" not in err
    p = subprocess.run(_train(mlp, 300, "--progress"), capture_output=True,
                       env=dict(os.environ, TFG_PROGRESS_DELAY="0"))
    assert b"loss=" in p.stderr and b"\x1b" not in p.stderr  # forced on a pipe: no colour
    rc, out, err = _in_pty([sys.executable, "-m", "tfg", "run", "nosuch.pb", "--fetch", "y"],
                           env={"NO_COLOR": ""})
    assert rc == 2 and err.startswith("\x1b[31mtfg: error:\x1b[0m ")
    rc, out, err = _in_pty([sys.executable, "-m", "tfg", "run", "nosuch.pb", "--fetch", "y"],
                           env={"NO_COLOR": "1"})
    assert rc == 2 and err.startswith("tfg: error: ")


def test_value_text():
    assert progress.value_text("loss", np.float32(0.123456)) == "loss=0.1235"
    assert progress.value_text("y", np.array([1.0, 3.0])) == "y mean=2"
    assert progress.value_text("s", np.array([b"a"], dtype=object)) is None
    assert not progress.colour_wanted(io.StringIO(), {})


def test_run_progress_silent_when_short_piped_or_disabled(mlp):
    rc, out, err = _in_pty(_train(mlp, 5))  # the default 1 s delay: a short run says nothing
    assert rc == 0 and err == "" and out.startswith(b"loss = ")
    rc, out, err = _in_pty(_train(mlp, 300, "--no-progress"), env={"TFG_PROGRESS_DELAY": "0"})
    assert rc == 0 and err == ""
    p = subprocess.run(_train(mlp, 300), capture_output=True,
                       env=dict(os.environ, TFG_PROGRESS_DELAY="0"))
    assert p.returncode == 0 and p.stderr == b""  # stderr is a pipe
    p = subprocess.run(_train(mlp, 300, "--progress"), capture_output=True,
                       env=dict(os.environ, TFG_PROGRESS_DELAY="0"))
    assert p.returncode == 0 and b"step 300/300" in p.stderr  # forced


# A pass that takes half a second, registered in the child before the CLI runs, so the pass
# line is drawn whatever the speed of the real passes.
_SLOW_PASS = """
import sys, time
from tfg.passes.manager import register_pass
@register_pass("sleepy", "test pass: sleeps")
def sleepy(graph, opts):
    time.sleep(0.5)
    return False
from tfg.cli import main
main(sys.argv[1:])
"""


def test_optimize_shows_the_pass_on_a_terminal(mlp):
    argv = [sys.executable, "-c", _SLOW_PASS, "optimize", str(mlp / "g.pb"),
            "--passes", "prune,sleepy", "--report"]
    rc, out, err = _in_pty(argv, env={"TFG_PROGRESS_DELAY": "0"})
    assert rc == 0, err
    assert re.search(r"\rpass 2/4 sleepy  0:0\d", err)
    # the line is erased before the report: the report starts on a clean line
    before, _, report = err.partition("pass       round")
    assert before.endswith("\r") and before.rsplit("\r", 2)[-2].strip() == ""
    assert "sleepy" in report and "nodes:" in report
    from tfg.graphdef import io as gio

    assert len(gio.loads(out)) > 0  # stdout still holds the graph
    p = subprocess.run(argv[:3] + argv[3:] + ["-o", os.devnull], capture_output=True,
                       env=dict(os.environ, TFG_PROGRESS_DELAY="0"))
    assert p.returncode == 0 and "sleepy" in p.stderr.decode()
    assert "\r" not in p.stderr.decode()  # piped: the report only



def test_ctrl_c_ends_the_line_before_the_message(mlp, tmp_path):
    """...and still saves the variables (--save) and prints the last step's values."""
    master, slave = pty.openpty()
    env = dict(os.environ, TFG_PROGRESS_DELAY="0")
    env.pop("TFG_DEBUG", None)
    saved = tmp_path / "saved"
    p = subprocess.Popen(_train(mlp, 10**7, "--save", str(saved)), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=slave, env=env, cwd=ROOT,
                         preexec_fn=default_sigint)
    out = b""
    os.close(slave)
    err = b""
    try:
        deadline = time.monotonic() + 60
        while b"steps/s" not in err and time.monotonic() < deadline:
            err += os.read(master, 4096)
        p.send_signal(signal.SIGINT)
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            err += data
        out = p.stdout.read()
    finally:
        os.close(master)
        p.stdout.close()
        if p.poll() is None:
            p.kill()
        p.wait(timeout=60)
    text = err.decode(errors="replace")
    assert p.returncode == 130, text
    # the last progress line is kept, then the message starts on a line of its own
    m = re.search(r"\rstep +\d+/10000000 [^\r\n]*\r?\ntfg: interrupted after (\d+) of "
                  r"10000000 steps; variables saved to \S+; the fetched values are those of "
                  r"step (\d+)\r?\n$", text)
    assert m and m.group(1) == m.group(2), text
    assert re.fullmatch(rb"loss = array\([-\d.e]+, dtype=float32\)\n", out)
    assert any(saved.iterdir())  # the variables of the last completed step


def test_delay_from_the_environment(monkeypatch):
    from tfg.cli.progress import default_delay

    for value, want in (("0", 0.0), ("2.5", 2.5), ("-3", 0.0), ("nan", 1.0), ("inf", 1.0),
                        ("soon", 1.0), ("1e9", 86400.0)):
        monkeypatch.setenv("TFG_PROGRESS_DELAY", value)
        assert default_delay() == want, value
    monkeypatch.delenv("TFG_PROGRESS_DELAY")
    assert default_delay() == 1.0
