"""`tfg worker`: serve one task of a cluster until stopped (SIGTERM or Ctrl-C)."""
import re
import signal
import sys
import threading

import click

from tfg.errors import TfgInputError
from tfg.executor.distributed.auth import resolve_token
from tfg.executor.distributed.spec import parse_cluster, read_pem, task_from_tf_config
from tfg.executor.distributed.worker import serve
from tfg.executor.limits import parse_size

# HOST (a name, an IPv4 address, [IPv6]) with an optional :PORT.
_BIND = re.compile(r"^(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")


@click.command("worker")
@click.option("--cluster", default=None, metavar="SPEC",
              help="Cluster spec: JSON file, inline JSON or job=host:port,host:port "
                   "(default: TF_CONFIG).")
@click.option("--job", default=None, metavar="NAME", help="This task's job (default: worker).")
@click.option("--task", "task", type=click.IntRange(min=0), default=None, metavar="I",
              help="This task's index in its job (default: 0).")
@click.option("--bind", default=None, metavar="ADDR",
              help="Listen here instead of 127.0.0.1 (HOST keeps the spec's port, or "
                   "HOST:PORT).")
@click.option("--devices", default=None, metavar="SPEC",
              help="Devices this task serves: cpu:N, gpu:N (default: cpu:1).")
@click.option("--auth-token", default=None, envvar="TFG_AUTH_TOKEN", metavar="TOKEN",
              help="Refuse RPCs without this token (also TFG_AUTH_TOKEN).")
@click.option("--auth-token-file", default=None, metavar="FILE",
              help="Read the token from FILE's first line (not shown in ps).")
@click.option("--max-memory", default=None, metavar="SIZE",
              help="Refuse a tensor larger than SIZE (e.g. 4G) before allocating it "
                   "(default: 80% of the memory available at start).")
@click.option("--idle-timeout", type=click.FloatRange(min=0, min_open=True), default=3600.0,
              show_default=True, metavar="S",
              help="Drop a session (its variables) no master has used for S seconds.")
# 256 is worker.DEFAULT_MAX_CALLS (not imported here: it loads grpc, slow for `tfg --help`).
@click.option("--max-calls", type=click.IntRange(min=1), default=256, show_default=True,
              metavar="N",
              help="Serve at most N RPCs at once (a thread each); more are refused with "
                   "RESOURCE_EXHAUSTED.")
@click.option("--tls-cert", default=None, metavar="PEM",
              help="Serve TLS with this certificate (with --tls-key).")
@click.option("--tls-key", default=None, metavar="PEM", help="The certificate's private key.")
@click.option("--tls-ca", default=None, metavar="PEM",
              help="CA that signed the other workers' certificates (default: --tls-cert).")
@click.option("--verbose", is_flag=True, help="Log one line per request to stderr.")
def command(cluster, job, task, bind, devices, auth_token, auth_token_file, max_memory,
            idle_timeout, max_calls, tls_cert, tls_key, tls_ca, verbose):
    """Serve one task of a cluster: the master (`tfg run --cluster`) registers graph parts
    here and runs steps on them.

    \b
    Examples:
      tfg worker --cluster worker=127.0.0.1:2222,127.0.0.1:2223 --job worker --task 0
      TF_CONFIG='{"cluster":{"worker":["127.0.0.1:2222"]},"task":{"type":"worker","index":0}}' tfg worker
    """
    if cluster is None:
        jobs, env_job, env_task = task_from_tf_config()
        job = env_job if job is None else job
        task = env_task if task is None else task
    else:
        jobs = parse_cluster(cluster)
    job = job or "worker"
    task = 0 if task is None else task
    auth_token = resolve_token(auth_token, auth_token_file)
    if bind is not None and not _BIND.match(bind):
        # gRPC would log its own multi-line complaint to stderr before our error line.
        raise TfgInputError(f"--bind {bind!r}: expected HOST or HOST:PORT (a name or an IP "
                            "address)")
    max_memory = None if max_memory is None else parse_size(max_memory)
    pems = [None if p is None else read_pem(p, flag) for p, flag in
            ((tls_cert, "--tls-cert"), (tls_key, "--tls-key"), (tls_ca, "--tls-ca"))]
    if tls_ca is not None and tls_cert is None:
        raise TfgInputError("--tls-ca on a worker needs --tls-cert and --tls-key")
    server = serve(jobs, job, task, bind=bind, devices=devices, token=auth_token,
                   verbose=verbose, tls_cert=pems[0], tls_key=pems[1], tls_ca=pems[2],
                   max_memory=max_memory, idle_timeout=idle_timeout, max_calls=max_calls)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    devs = ", ".join(d.name for d in server.service.devices)
    sys.stderr.write(f"tfg worker /job:{job}/task:{task} listening on {server.address} "
                     f"({devs}){' with auth token' if auth_token else ''}"
                     f"{' over TLS' if tls_cert else ''}\n")
    sys.stderr.flush()
    while not stop.wait(0.5):
        pass
    server.stop(grace=1.0)
    if verbose:
        sys.stderr.write(f"tfg worker /job:{job}/task:{task} stopped\n")

