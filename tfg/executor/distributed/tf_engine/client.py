"""A client of one TensorFlow server's `tensorflow.WorkerService`, with tfg's errors.

    >>> client = TFWorkerClient(("worker", 1), "127.0.0.1:2223")
    >>> [d.name for d in client.call("GetStatus", tfpb.GetStatusRequest(), 5).device_attributes]
    ['/job:worker/replica:0/task:1/device:CPU:0']

The channel options, the auth metadata and the mapping of gRPC failures to errors that name
the task are those of tfg's own WorkerClient (rpc.py); only the stub differs. `start` runs a
call as a gRPC future, which the master cancels to stop a step: a TensorFlow worker cancels
the step it runs for a RunGraph call that its caller cancelled.
"""
import grpc

from tfg.executor.distributed import rpc

# TensorFlow's servers answer a client that pings more often than every 5 minutes without data
# with GOAWAY "too_many_pings" (their gRPC default): no keepalive pings on these channels. A
# dead server is found by the master's GetStatus pings (step.py) instead.
OPTIONS = [(k, v) for k, v in rpc.OPTIONS if not k.startswith(("grpc.keepalive",
                                                               "grpc.http2.max_pings"))]
from tfg.schemas.proto import tf_worker_pb2 as tfpb
from tfg.schemas.proto import tf_worker_pb2_grpc, worker_pb2, worker_pb2_grpc


class TFWorkerClient(rpc.WorkerClient):
    """rpc.WorkerClient speaking TensorFlow's WorkerService."""

    def __init__(self, task, address, token=None, tls_ca=None):
        super().__init__(task, address, token, tls_ca)
        self.channel.close()  # rpc.WorkerClient's has keepalive pings
        if tls_ca:
            creds = grpc.ssl_channel_credentials(root_certificates=tls_ca)
            self.channel = grpc.secure_channel(address, creds, options=OPTIONS)
        else:
            self.channel = grpc.insecure_channel(address, options=OPTIONS)
        self.stub = tf_worker_pb2_grpc.WorkerServiceStub(self.channel)

    def start(self, method, request, done, timeout=None):
        """Start `method` as a future; `done(response or exception)` when it ends. Returns
        the future (`.cancel()` ends the call, and with it a RunGraph's step)."""
        future = getattr(self.stub, method).future(request, timeout=timeout,
                                                   metadata=self.metadata)

        def finished(f):
            try:
                result = f.result()
            except grpc.FutureCancelledError as e:
                result = e
            except grpc.RpcError as e:
                result = e
            done(result)

        future.add_done_callback(finished)
        return future

    def recv_tensor(self, step_id, key, compress=""):
        """Pull one tensor with TensorFlow's RecvTensor -> (array or None, is_dead): what a
        tfg worker's RemoteRendezvous calls for a key whose sender is a TensorFlow task.
        `compress` is ignored: a TensorFlow server has no truncated transfers and always sends
        the tensor whole (exact values, only more bytes)."""
        resp = self.stub.RecvTensor(tfpb.RecvTensorRequest(step_id=step_id, rendezvous_key=key),
                                    metadata=self.metadata)
        if resp.is_dead:
            return None, True
        return rpc.decode(resp.tensor), False


def is_tensorflow_server(config):
    """Whether the first task of `config` (a ClusterConfig) answers TensorFlow's GetStatus
    but not tfg's: a TensorFlow server. Asked only after tfg's GetStatus failed."""
    task = config.tasks[0]
    client = TFWorkerClient(task, config.address(task), config.auth_token, config.tls_ca)
    wait = min(2.0, config.timeout)
    try:
        try:
            client.stub.GetStatus(tfpb.GetStatusRequest(), timeout=wait,
                                  metadata=client.metadata)
        except grpc.RpcError:
            return False
        try:
            worker_pb2_grpc.WorkerServiceStub(client.channel).GetStatus(
                worker_pb2.GetStatusRequest(), timeout=wait, metadata=client.metadata)
        except grpc.RpcError as e:
            return e.code() == grpc.StatusCode.UNIMPLEMENTED
        return False
    finally:
        client.close()
