"""Cluster execution: `tfg worker` processes serving tasks over gRPC, and the master that runs
steps on them through the same executor as local runs (only the rendezvous differs).

    >>> server = serve({"worker": ["127.0.0.1:2222"]}, "worker", 0)      # in each worker
    >>> sess = connect(graph, "worker=127.0.0.1:2222")                    # in the client
    >>> sess.run("y", feeds={"x": 1.0})

Modules: spec (cluster SPEC, TF_CONFIG, options), rpc (gRPC options, auth token, clients,
chunked tensors), rendezvous (RecvTensor pulls), worker (the service), master (placement,
registration, steps, failures, checkpoints), resume (checkpoint every N steps and resume),
tf_engine (the same, with TensorFlow servers as the workers).
"""
from tfg.errors import TfgRuntimeError
from tfg.executor.distributed.spec import ClusterConfig  # noqa: F401


def connect(graph, cluster, devices=None):
    """A ClusterSession running `graph` on `cluster` (a SPEC, a dict or a ClusterConfig);
    a TFClusterSession when the ClusterConfig's engine is "tensorflow", or when no engine is
    named and the first task turns out to be a TensorFlow server (it does not serve tfg's
    GetStatus but answers TensorFlow's)."""
    from tfg.executor.distributed.master import ClusterSession  # lazy: gRPC
    from tfg.executor.distributed.tf_engine import client as tf_client  # lazy: gRPC
    from tfg.executor.distributed.tf_engine.master import TFClusterSession  # lazy: gRPC

    engine = getattr(cluster, "engine", None)
    if engine == "tensorflow":
        return TFClusterSession(graph, cluster, devices=devices)
    try:
        return ClusterSession(graph, cluster, devices=devices)
    except TfgRuntimeError:
        if engine is None and tf_client.is_tensorflow_server(ClusterConfig(cluster)):
            return TFClusterSession(graph, cluster, devices=devices)
        raise


def serve(jobs, job, task, **options):
    """Start serving one task; see tfg.executor.distributed.worker.serve."""
    from tfg.executor.distributed.worker import serve as _serve  # lazy: gRPC, as above

    return _serve(jobs, job, task, **options)
