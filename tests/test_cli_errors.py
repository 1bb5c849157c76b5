"""Errors a user can act on (issue 15, item 5): each is one line naming the flag, tensor or
file at fault, exit status 2, and says what to do."""
import json
import os
import pty
import re
import shlex
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from helpers import tfg_cli
from tfg import builder as tb
from tfg.cli import SUBCOMMANDS
from tfg.graphdef import io


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """x: float32 [2] -> loss = sum(x * 2); a variable w with an `init` NoOp."""
    d = tmp_path_factory.mktemp("errors")
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [2], name="x")
        w = tb.Variable(np.ones(2, np.float32), name="w")
        tb.reduce_sum(x * w * 2.0, name="loss")
        tb.global_variables_initializer(name="init")
    path = d / "g.pb"
    io.save(g.graph, str(path))
    return path


def fails(*args):
    """stderr of a command that must exit 2 with one line."""
    p = tfg_cli(*args, check=False)
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    assert err.count("\n") == 1 and err.startswith("tfg: error: "), err
    return err.strip()[len("tfg: error: "):]


def test_tensor_fed_twice_is_named_and_feed_replaces_a_key_of_feeds(graph, tmp_path):
    both = tmp_path / "both.npz"
    np.savez(both, **{"x": np.ones(2, np.float32), "x:0": np.ones(2, np.float32)})
    assert fails("run", graph, "--feeds", both, "--init", "init", "--fetch", "loss") == (
        f"--feeds {both}: tensor 'x:0' is fed twice (as 'x' and 'x:0')")
    assert fails("run", graph, "--feed", "x=[1,1]", "--feed", "x:0=[2,2]", "--fetch",
                 "loss") == "--feed: tensor 'x:0' is fed twice"
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **{"x:0": np.full(2, 100, np.float32)})
    p = tfg_cli("run", graph, "--feeds", feeds, "--feed", "x=[1,2]", "--init", "init",
                "--fetch", "loss", "--json")
    assert json.loads(p.stdout)["loss"]["value"] == 6.0  # --feed won: (1 + 2) * 2


def test_did_you_mean(graph):
    assert fails("run", graph, "--feed", "x=[1,1]", "--fetch", "los") == (
        "--fetch los: no node named 'los' in the graph; did you mean 'loss'?")
    assert fails("run", graph, "--target", "iniit") == (
        "--target iniit: no node named 'iniit' in the graph; did you mean 'init'?")
    assert fails("run", graph, "--init", "nosuch", "--fetch", "loss") == (
        "--init nosuch: no node named 'nosuch' in the graph")
    assert fails("run", graph, "--feed", "xx=[1,1]", "--fetch", "loss") == (
        "--feed/--feeds xx: no node named 'xx' in the graph; did you mean 'x'?")
    assert fails("compare", graph, graph, "--feed", "xx=[1,1]", "--fetch", "loss") == (
        "--feed/--feeds xx: no node named 'xx' in the graph; did you mean 'x'?")
    assert "--xs w_read: no node named 'w_read'" in fails("grad", graph, "--ys", "loss",
                                                          "--xs", "w_read")
    assert "; did you mean 'loss'" in fails("grad", graph, "--ys", "lost", "--xs", "w")
    assert fails("optimize", graph, "--keep", "loss,los").startswith(
        "--keep los: no node named 'los'")
    assert fails("prune", graph, "--fetch", "loss:0,loos:1").startswith(
        "--fetch loos:1: no node named 'loos'")


def test_debug_after_the_subcommand(graph):
    p = tfg_cli("run", graph, "--fetch", "nosuch", "--debug", check=False)
    assert p.returncode == 2 and b"Traceback" in p.stderr
    p = tfg_cli("run", graph, "--fetch", "nosuch", check=False)
    assert b"Traceback" not in p.stderr


def test_signature_key_errors_list_the_keys():
    model = FIXTURES / "savedmodel" / "mlp"
    assert fails("run", model, "--signature", "serving_default", "--feed", "z=[[0,0,0,0]]") == (
        "--feed z: signature 'serving_default' has no input 'z' (its inputs: x)")
    assert fails("run", model, "--signature", "serving_default", "--random-feeds",
                 "--fetch", "prob") == ("--fetch prob: signature 'serving_default' has no "
                                        "output 'prob' (its outputs: classes, probs)")


def test_feeds_that_are_not_npz(graph, tmp_path):
    npy, text, pickled = tmp_path / "x.npy", tmp_path / "x.txt", tmp_path / "p.npz"
    np.save(npy, np.ones(2, np.float32))
    text.write_text("x = 1, 2\n")
    np.savez(pickled, x=np.array([{"a": 1}], dtype=object))
    assert fails("run", graph, "--feeds", npy, "--fetch", "loss") == (
        f"--feeds {npy}: a .npy file (one array), not an .npz; feed it with --feed "
        "NAME=@FILE.npy")
    assert fails("run", graph, "--feeds", text, "--fetch", "loss") == (
        f"--feeds {text}: not an .npz file (a zip of .npy arrays, as numpy.savez or `tfg run "
        "-o OUT.npz` writes)")
    err = fails("run", graph, "--feeds", pickled, "--fetch", "loss")
    assert "Python objects (pickled)" in err and "allow_pickle" not in err


def test_devices_count_is_explained(graph):
    assert fails("run", graph, "--feed", "x=[1,1]", "--init", "init", "--fetch", "loss",
                 "--devices", "gpu:0") == (
        "device spec 'gpu:0': N in gpu:N is a number of devices (at least 1; gpu:1 is one); "
        "to name one device, write /device:GPU:0")
    p = tfg_cli("run", graph, "--feed", "x=[1,1]", "--init", "init", "--fetch", "loss",
                "--devices", "/device:CPU:0")
    assert p.stdout.startswith(b"loss = ")


def test_worker_on_a_taken_port_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        err = fails("worker", "--cluster", f"worker=127.0.0.1:{port}", "--task", "0")
    assert err == (f"cannot listen on 127.0.0.1:{port}: the port is in use (another tfg "
                   "worker, or another program)")


def test_info_at_a_terminal_says_it_reads_stdin():
    master, slave = pty.openpty()
    env = dict(os.environ)
    env.pop("TFG_DEBUG", None)
    p = subprocess.Popen([sys.executable, "-m", "tfg", "info"], stdin=slave,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        err = b""
        os.set_blocking(p.stderr.fileno(), False)
        while b"stdin" not in err and time.monotonic() < deadline and p.poll() is None:
            err += p.stderr.read() or b""
            time.sleep(0.05)
        assert err.startswith(b"tfg info: reading a graph from stdin"), err
        os.write(master, b"\x04")  # Ctrl-D: an empty graph
        p.wait(timeout=60)
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


def test_json_spelling_on_run(graph):
    a = tfg_cli("run", graph, "--feed", "x=[1,2]", "--init", "init", "--fetch", "loss",
                "--json").stdout
    b = tfg_cli("run", graph, "--feed", "x=[1,2]", "--init", "init", "--fetch", "loss",
                "--format", "json").stdout
    assert a == b and json.loads(a)["loss"]["value"] == 6.0
    assert fails("run", graph, "--feed", "x=[1,2]", "--fetch", "loss", "--json",
                 "--format", "text") == "--json and --format text disagree"


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_help_examples_quote_their_brackets(name):
    """zsh expands [ ] * ? in unquoted words: every example in --help quotes them."""
    text = tfg_cli(name, "--help").stdout.decode()
    examples = text.split("Example", 1)[1].split("Options:", 1)[0] if "Example" in text else ""
    for line in examples.splitlines()[1:]:
        unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", line)
        assert not re.search(r"[\[\]*?]", unquoted), f"tfg {name} --help: {line.strip()}"
        if line.strip():
            shlex.split(line)  # and each line is a complete shell line
