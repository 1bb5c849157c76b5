"""Security: no pickle/eval/exec/shell in the package; workers bind loopback by default,
refuse unauthenticated RPCs when a token is set, and speak TLS when given a certificate;
string tensors and attrs of any size or content never reach a shell or eval."""
import ast
import builtins
import datetime
import ipaddress
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor.distributed import ClusterConfig, serve
from tfg.executor.distributed.local import free_port
from tfg.executor.distributed.rpc import WorkerClient, health_check
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.schemas.proto import worker_pb2 as pb

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "tfg"
sys.path.insert(0, str(PACKAGE.parent / "tools"))
import fuzz  # noqa: E402  (tools/fuzz.py: runs the CLI in-process)
T0, T1 = "/job:worker/task:0", "/job:worker/task:1"


# --- the package itself -----------------------------------------------------------------------
FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "cloudpickle", "joblib"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def test_no_pickle_eval_exec_or_shell_anywhere_in_the_package():
    problems = []
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        where = lambda n: f"{path.relative_to(PACKAGE.parent)}:{n.lineno}"  # noqa: E731
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in FORBIDDEN_MODULES:
                        problems.append(f"{where(node)} imports {a.name}")
            elif isinstance(node, ast.ImportFrom):
                if (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
                    problems.append(f"{where(node)} imports from {node.module}")
            elif isinstance(node, ast.Call):
                name = _dotted(node.func)
                kw = {k.arg: k.value for k in node.keywords}
                if name in FORBIDDEN_CALLS:
                    problems.append(f"{where(node)} calls {name}")
                if name in ("os.system", "os.popen", "subprocess.getoutput",
                            "subprocess.getstatusoutput", "yaml.load", "yaml.unsafe_load"):
                    problems.append(f"{where(node)} calls {name}")
                shell = kw.get("shell")
                if shell is not None and not (isinstance(shell, ast.Constant)
                                              and shell.value is False):
                    problems.append(f"{where(node)} passes shell={ast.unparse(shell)}")
                if name.endswith(("np.load", "numpy.load")):
                    ap = kw.get("allow_pickle")
                    if not (isinstance(ap, ast.Constant) and ap.value is False):
                        problems.append(f"{where(node)} calls {name} without "
                                        "allow_pickle=False")
                if name.endswith(".astype") or name.endswith("np.save") or name.endswith(
                        "np.savez"):
                    continue
    assert not problems, "\n".join(problems)


def test_npz_outputs_never_hold_pickles(tmp_path):
    """`tfg run -o` of a string fetch writes bytes, loadable with allow_pickle=False."""
    with tb.Graph() as g:
        tb.identity(tb.constant(np.array([b"a", b"\x00\xff" * 1000], dtype=object)), name="s")
    path = tmp_path / "g.pb"
    io.save(g.graph, str(path))
    p = subprocess.run([sys.executable, "-m", "tfg", "run", str(path), "--fetch", "s", "-o",
                        str(tmp_path / "o.npz")], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with np.load(tmp_path / "o.npz", allow_pickle=False) as data:
        assert data["s"][1] == b"\x00\xff" * 1000


def test_a_pickled_feed_file_is_refused(tmp_path):
    np.save(tmp_path / "evil.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with tb.Graph() as g:
        tb.identity(tb.placeholder(tb.float32, [1], name="x"), name="y")
    path = tmp_path / "g.pb"
    io.save(g.graph, str(path))
    p = subprocess.run([sys.executable, "-m", "tfg", "run", str(path), "--feed",
                        f"x=@{tmp_path / 'evil.npy'}", "--fetch", "y"], capture_output=True,
                       timeout=60)
    assert p.returncode == 2 and b"pickle" in p.stderr.lower() and b"Traceback" not in p.stderr


# --- graph content never reaches a shell or eval -------------------------------------------
MARK = "PWNED_BY_TFG_GRAPH"
PAYLOADS = [f"__import__('os').system('touch {MARK}')", f"$(touch {MARK})", f"`touch {MARK}`",
            f"'; touch {MARK}; '", f"{{{{{MARK}}}}}\n\\\"<script>", f"{MARK}" * 200000]


def payload_graph(tmp_path):
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2], name="x")
        strings = tb.constant(np.array([p.encode() for p in PAYLOADS], dtype=object),
                              name="strings")
        tb.identity(strings, name="s")
        tb.identity(tb.reduce_sum(x * x), name="out")
    gd = g.graph.to_proto()
    for nd in gd.node:
        for i, p in enumerate(PAYLOADS):
            nd.attr[f"_payload{i}"].s = p.encode()
        nd.attr["_list_payload"].list.s.extend(p.encode() for p in PAYLOADS[:3])
    weird = gd.node.add(name=f"n/$(touch {MARK})/`x`", op="Identity", input=["x"])
    weird.attr["T"].type = 1
    path = tmp_path / "payload.pb"
    path.write_bytes(gd.SerializeToString())
    np.savez(tmp_path / "feeds.npz", **{"x:0": np.ones(2, np.float32)})
    return path


class _Trap:
    """Records every eval/exec/system/popen/Popen/pickle call while graphs are processed."""

    def __init__(self, monkeypatch):
        import pickle

        self.calls = []
        for owner, name in ((builtins, "eval"), (builtins, "exec"), (os, "system"),
                            (os, "popen"), (pickle, "loads"), (pickle, "load")):
            monkeypatch.setattr(owner, name, self._wrap(name, getattr(owner, name)))
        real_init = subprocess.Popen.__init__
        trap = self

        def popen_init(self_, args, *a, **kw):
            trap.calls.append(("Popen", repr(args), kw.get("shell", False)))
            return real_init(self_, args, *a, **kw)

        monkeypatch.setattr(subprocess.Popen, "__init__", popen_init)

    def _wrap(self, name, fn):
        def wrapped(*args, **kw):
            self.calls.append((name, repr(args)[:100000], False))
            return fn(*args, **kw)
        return wrapped


def test_payloads_in_strings_attrs_and_names_never_reach_a_shell_or_eval(tmp_path,
                                                                          monkeypatch):
    path = payload_graph(tmp_path)
    monkeypatch.chdir(tmp_path)
    argvs = [["info", path, "--json"], ["convert", path, "-o", tmp_path / "c.pbtxt"],
             ["render", path, "-o", tmp_path / "r.dot"],
             ["optimize", path, "--keep", "s,out", "-o", tmp_path / "o.pb"],
             ["prune", path, "--fetch", "s", "-o", tmp_path / "p.pb"],
             ["place", path, "--devices", "cpu:2", "-o", tmp_path / "pl.pb"],
             ["partition", path, "--devices", "cpu:2", "-o", tmp_path / "pa.pb"],
             ["grad", path, "--ys", "out", "--xs", "x", "-o", tmp_path / "g.pb"],
             ["run", path, "--feeds", tmp_path / "feeds.npz", "--fetch", "s,out", "-o",
              tmp_path / "r.npz"]]
    for argv in argvs:  # warm up: imports (namedtuple/dataclass may exec at import)
        fuzz.run_in_process([str(a) for a in argv])
    trap = _Trap(monkeypatch)
    for argv in argvs:
        code, err, _ = fuzz.run_in_process([str(a) for a in argv])
        assert code == 0, f"{argv[0]}: {err}"
    for name, args, shell in trap.calls:
        assert not shell, f"{name} with shell=True"
        assert MARK not in args, f"graph content reached {name}: {args[:200]}"
    assert not list(tmp_path.rglob(f"*{MARK}*")) and not os.path.exists(MARK)
    with np.load(tmp_path / "r.npz", allow_pickle=False) as data:
        assert [v.decode() for v in data["s"]] == PAYLOADS  # carried verbatim, never run
    if subprocess.run(["which", "dot"], capture_output=True).returncode == 0:
        code, err, _ = fuzz.run_in_process(["render", str(path), "-o", str(tmp_path / "r.svg")])
        assert code == 0, err
        assert all(not shell and MARK not in args for n, args, shell in trap.calls
                   if n == "Popen")


# --- workers: loopback, tokens ----------------------------------------------------------------
def two_task_graph():
    with tb.Graph() as g:
        with tb.device(T0):
            x = tb.placeholder(tb.float32, [3], name="x")
            y = x * 2.0
        with tb.device(T1):
            tb.identity(tb.reduce_sum(y * y), name="z")
    return g.graph


def _non_loopback_ip():
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("10.255.255.255", 1))  # no packet is sent: picks the outgoing address
        ip = s.getsockname()[0]
        s.close()
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


def test_workers_bind_loopback_by_default():
    port = free_port()
    server = serve({"worker": [f"203.0.113.7:{port}"]}, "worker", 0)
    try:
        assert server.address == f"127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        ip = _non_loopback_ip()
        if ip is not None:  # not reachable from the network
            with pytest.raises(OSError):
                socket.create_connection((ip, port), timeout=2).close()
    finally:
        server.stop(grace=0)


def test_a_token_is_required_when_set():
    ports = [free_port(), free_port()]
    jobs = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    servers = [serve(jobs, "worker", i, token="s3cret") for i in range(2)]
    try:
        addr = jobs["worker"][0]
        for token in (None, "wrong", "s3cret\x00"[:-1] + "x"):
            client = WorkerClient(("worker", 0), addr, token=token)
            with pytest.raises(TfgInputError, match="refused GetStatus.*auth token"):
                client.call("GetStatus", pb.GetStatusRequest(), timeout=5)
            client.close()
        client = WorkerClient(("worker", 0), addr, token="s3cret")
        assert client.call("GetStatus", pb.GetStatusRequest(), timeout=5).devices
        assert health_check(client.channel, 5) == 1  # the health check needs no secret
        spec = "worker=" + ",".join(jobs["worker"])
        with pytest.raises(TfgInputError, match="auth token"):
            Session(two_task_graph(), cluster=ClusterConfig(spec, auth_token="nope"))
        sess = Session(two_task_graph(), cluster=ClusterConfig(spec, auth_token="s3cret"))
        assert float(sess.run("z", feeds={"x": [1, 2, 3]})) == pytest.approx(56.0)
    finally:
        for s in servers:
            s.stop(grace=0)


# --- TLS --------------------------------------------------------------------------------------
def make_cert(folder, name="tfg-test"):
    """A self-signed certificate for localhost/127.0.0.1 -> (cert path, key path)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        return _make_cert_openssl(folder, name)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _make_cert_openssl(folder, name):
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        f"/CN={name}", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", str(key_path), "-out", str(cert_path)],
                       check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("neither the cryptography package nor openssl can make a certificate")
    return cert_path, key_path


def test_tls_workers_and_client(tmp_path):
    cert, key = make_cert(tmp_path)
    other, _ = make_cert(tmp_path, "someone-else")
    ports = [free_port(), free_port()]
    jobs = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    spec = "worker=" + ",".join(jobs["worker"])
    servers = [serve(jobs, "worker", i, tls_cert=cert.read_bytes(), tls_key=key.read_bytes(),
                     token="tok") for i in range(2)]
    try:
        # Verified TLS, plus the token: the step crosses tasks (worker-to-worker TLS too).
        sess = Session(two_task_graph(),
                       cluster=ClusterConfig(spec, tls_ca=str(cert), auth_token="tok"))
        assert float(sess.run("z", feeds={"x": [1, 2, 3]})) == pytest.approx(56.0)
        # A plaintext client, or one that trusts another CA, gets nowhere (clean errors).
        for cfg in (ClusterConfig(spec, timeout=3, auth_token="tok"),
                    ClusterConfig(spec, timeout=3, auth_token="tok", tls_ca=str(other))):
            start = time.monotonic()
            with pytest.raises(TfgRuntimeError, match="task /job:worker/task:0"):
                Session(two_task_graph(), cluster=cfg)
            assert time.monotonic() - start < 15
    finally:
        for s in servers:
            s.stop(grace=0)
    with pytest.raises(TfgInputError, match="--tls-ca"):
        ClusterConfig(spec, tls_ca=str(tmp_path / "missing.pem"))
    with pytest.raises(TfgInputError, match="not a PEM"):
        (tmp_path / "junk.pem").write_text("junk")
        ClusterConfig(spec, tls_ca=str(tmp_path / "junk.pem"))


def test_tls_from_the_command_line(tmp_path):
    cert, key = make_cert(tmp_path)
    ports = [free_port(), free_port()]
    spec = "worker=" + ",".join(f"127.0.0.1:{p}" for p in ports)
    graph = tmp_path / "g.pb"
    io.save(two_task_graph(), str(graph))
    procs = [subprocess.Popen([sys.executable, "-m", "tfg", "worker", "--cluster", spec,
                               "--task", str(i), "--tls-cert", str(cert), "--tls-key", str(key)],
                              stderr=subprocess.PIPE) for i in range(2)]
    try:
        for p in procs:  # the banner says TLS once it listens
            line = p.stderr.readline().decode()
            assert "over TLS" in line, line
        ok = subprocess.run([sys.executable, "-m", "tfg", "run", str(graph), "--cluster", spec,
                             "--tls-ca", str(cert), "--feed", "x=[1,2,3]", "--fetch", "z"],
                            capture_output=True, timeout=120)
        assert ok.returncode == 0, ok.stderr
        assert b"z = " in ok.stdout and b"56" in ok.stdout
        plain = subprocess.run([sys.executable, "-m", "tfg", "run", str(graph), "--cluster",
                                spec, "--timeout", "3", "--feed", "x=[1,2,3]", "--fetch", "z"],
                               capture_output=True, timeout=120)
        assert plain.returncode == 1 and b"Traceback" not in plain.stderr
        assert plain.stderr.count(b"\n") == 1
        bad = subprocess.run([sys.executable, "-m", "tfg", "worker", "--cluster", spec,
                              "--task", "0", "--tls-cert", str(cert)], capture_output=True,
                             timeout=60)
        assert bad.returncode == 2 and b"--tls-cert and --tls-key go together" in bad.stderr
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
