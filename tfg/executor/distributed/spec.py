"""Who is who in a cluster: the task addresses, which task owns a device, the options a master
runs with, and TF_CONFIG for workers started without flags.

    >>> cfg = ClusterConfig("worker=127.0.0.1:2222,127.0.0.1:2223", timeout=5)
    >>> cfg.tasks
    [('worker', 0), ('worker', 1)]
    >>> cfg.address(("worker", 1)), task_of("/job:worker/replica:0/task:1/device:CPU:0")
    ('127.0.0.1:2223', ('worker', 1))
    >>> task_from_tf_config('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}')
    ({'worker': ['a:1']}, 'worker', 0)

The cluster SPEC forms are those of `tfg.passes.cluster_spec.parse_cluster` (a JSON file, JSON
inline, or `job=host:port,host:port`).
"""
import errno
import json
import os
import socket

from tfg.errors import TfgInputError
from tfg.graphdef.names import DeviceSpec
from tfg.passes.cluster_spec import parse_cluster

DEFAULT_TIMEOUT = 10.0
TOKEN_ENV = "TFG_AUTH_TOKEN"
ENGINES = ("tfg", "tensorflow")


class ClusterConfig:
    """A parsed cluster SPEC plus the master's options: the failure `timeout` (seconds) within
    which a dead or unreachable worker ends a step, and the `auth_token` every RPC carries
    (default: the TFG_AUTH_TOKEN environment variable), and `tls_ca`, a PEM file of the CA that
    signed the workers' certificates (TLS is on when it is given). `engine` says what the
    workers are: "tfg" (`tfg worker`) or "tensorflow" (TensorFlow servers, driven through
    tfg/executor/distributed/tf_engine); None (the default) finds out: tfg's protocol first,
    TensorFlow's when the first task does not serve tfg's (see distributed.connect).
    `compress_transfers` "bf16" sends float32 tensors between tasks as truncated 16-bit floats
    (RecvTensor)."""

    def __init__(self, spec, timeout=None, auth_token=None, tls_ca=None, engine=None,
                 compress_transfers=None):
        if isinstance(spec, ClusterConfig):
            engine = spec.engine if engine is None else engine
            compress_transfers = spec.compress_transfers if compress_transfers is None \
                else compress_transfers
            timeout = spec.timeout if timeout is None else timeout
            auth_token = spec.auth_token if auth_token is None else auth_token
            tls_ca = spec.tls_ca if tls_ca is None else tls_ca
            spec = spec.jobs
        self.tls_ca = read_pem(tls_ca, "--tls-ca") if isinstance(tls_ca, (str, os.PathLike)) \
            else tls_ca
        self.jobs = parse_cluster(spec)
        self.timeout = float(DEFAULT_TIMEOUT if timeout is None else timeout)
        if self.timeout <= 0:
            raise TfgInputError(f"--timeout must be positive, got {timeout}")
        self.auth_token = resolve_token(auth_token)
        self.engine = engine
        if engine is not None and engine not in ENGINES:
            raise TfgInputError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        compress_transfers = compress_transfers or "none"
        if compress_transfers not in ("none", "bf16"):
            raise TfgInputError(f"--compress-transfers must be none or bf16, not "
                                f"{compress_transfers!r}")
        self.compress_transfers = "" if compress_transfers == "none" else compress_transfers

    @property
    def tasks(self):
        return [(job, i) for job, addrs in self.jobs.items() for i in range(len(addrs))]

    def address(self, task):
        job, index = task
        addrs = self.jobs.get(job)
        if addrs is None or not 0 <= index < len(addrs):
            raise TfgInputError(f"the cluster has no task /job:{job}/task:{index} (it has "
                                f"{', '.join(task_label(t) for t in self.tasks)})")
        return addrs[index]

    def __repr__(self):
        return f"ClusterConfig({self.jobs!r}, timeout={self.timeout})"


def read_pem(path, flag):
    """The bytes of a PEM file (a certificate or key), or an input error naming the flag."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TfgInputError(f"{flag} {path}: cannot read ({e.strerror or e})") from None
    if b"-----BEGIN " not in data:
        raise TfgInputError(f"{flag} {path}: not a PEM file")
    return data


def resolve_token(token):
    """The explicit token, else $TFG_AUTH_TOKEN, else None (no authentication)."""
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    return token or None


def task_of(device):
    """(job, task index) of a device name; None when the name does not say both."""
    spec = DeviceSpec.parse(device) if device else DeviceSpec()
    if spec.job is None:
        return None
    return spec.job, spec.task if spec.task is not None else 0


def task_label(task):
    return f"/job:{task[0]}/task:{task[1]}"


def task_from_tf_config(text=None):
    """TF_CONFIG JSON (default: the environment variable) -> (jobs, job, task index)."""
    if text is None:
        text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        raise TfgInputError("no --cluster given and TF_CONFIG is not set")
    try:
        conf = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise TfgInputError(f"TF_CONFIG is not JSON ({e})") from None
    if not isinstance(conf, dict) or not isinstance(conf.get("cluster"), dict):
        raise TfgInputError('TF_CONFIG must look like {"cluster": {...}, "task": '
                            '{"type": "worker", "index": 0}}')
    task = conf.get("task") or {}
    job, index = task.get("type"), task.get("index", 0)
    if not isinstance(job, str) or not isinstance(index, int):
        raise TfgInputError("TF_CONFIG: task must give a string type and an integer index")
    return parse_cluster(conf["cluster"]), job, index


def refuse_taken_port(address):
    """A port another process listens on is an input error of one line, raised before gRPC
    tries it (gRPC would log its own error lines to stderr first).

    Before: a server listening on 127.0.0.1:2222.  After refuse_taken_port("127.0.0.1:2222"):
            TfgInputError("cannot listen on 127.0.0.1:2222: the port is in use ...").
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # SO_REUSEADDR: a port a stopped worker left in TIME_WAIT is free; a listening one not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise TfgInputError(f"cannot listen on {address}: the port is in use (another "
                                    "tfg worker, or another program)") from None
            # anything else (an address this machine lacks): gRPC's own error says it
        except (OverflowError, ValueError):  # a port out of range: likewise
            pass


def bind_address(spec_address, bind=None):
    """Where a worker listens: loopback on the SPEC's port, unless --bind says otherwise.

    `--bind 0.0.0.0` keeps the SPEC's port; `--bind HOST:PORT` is taken as it is.
    """
    port = spec_address.rsplit(":", 1)[-1]
    if not port.isdigit():
        raise TfgInputError(f"cluster address {spec_address!r} has no port")
    if not bind:
        return f"127.0.0.1:{port}"
    if bind.startswith("[") and bind.endswith("]"):  # a bare IPv6 host
        return f"{bind}:{port}"
    host, sep, bport = bind.rpartition(":")
    if sep and bport.isdigit() and (host.count(":") == 0 or host.startswith("[")):
        return bind
    return f"{bind}:{port}"
