"""gRPC plumbing shared by workers and masters: channel options (no 4 MB limit), the auth token
(metadata checked by a server interceptor), a client per task that turns RPC failures into
errors naming the task, and tensors cut into chunks for RecvTensor.

    >>> client = WorkerClient(("worker", 1), "127.0.0.1:2223", token="s3cret")
    >>> client.call("GetStatus", pb.GetStatusRequest(), timeout=5).incarnation
    1234567890
    >>> value, dead = assemble(tensor_chunks(np.arange(3.0), False))
    >>> value, dead
    (array([0., 1., 2.]), False)
"""
import hmac
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor.distributed import busy
from tfg.executor.distributed.spec import task_label
from tfg.kernels import list_codec
from tfg.schemas import tensors as tcodec
from tfg.schemas import truncate
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import tensor_pb2
from tfg.schemas.proto import worker_pb2 as pb
from tfg.schemas.proto import worker_pb2_grpc

# -1: unlimited. Protobuf itself still caps one message at 2 GiB; RecvTensor streams chunks.
OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    # Loopback peers: detect a peer that stopped answering without waiting for TCP timeouts.
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # After a peer comes back (restart, healed partition) reconnect within a second or two,
    # not after gRPC's default backoff of up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
SERVER_OPTIONS = OPTIONS + [("grpc.http2.min_ping_interval_without_data_ms", 5000),
                            ("grpc.so_reuseport", 0)]
TOKEN_KEY = "tfg-auth-token"
HEALTH_SERVICE = "grpc.health.v1.Health"
CHUNK_BYTES = 4 << 20
# Calls block a thread each (a step's RunGraph for as long as the step runs, a RecvTensor until
# the value is sent); a call must never wait for a free thread, so the pool is elastic.
CALLS = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="tfg-rpc")


class StepAborted(TfgRuntimeError):
    """A task stopped its part of a step because another part failed (a derived error)."""

    derived = True


class TaskUnreachable(TfgRuntimeError):
    """A task did not answer (dead, restarted or cut off)."""


def check_token(token):
    if token is not None and (not token.isascii() or not token.isprintable()):
        raise TfgInputError("the auth token must be printable ASCII")
    return token


class AuthInterceptor(grpc.ServerInterceptor):
    """Refuses (UNAUTHENTICATED) every call that does not carry the worker's token, from its
    metadata, before the request body is read; the standard health check stays open so that
    probes need no secret."""

    def __init__(self, token):
        self._token = check_token(token).encode()

    def intercept_service(self, continuation, details):
        if details.method.startswith(f"/{HEALTH_SERVICE}/"):
            return continuation(details)
        given = ""
        for key, value in details.invocation_metadata or ():
            if key == TOKEN_KEY:
                given = value
        if hmac.compare_digest(given.encode(), self._token):
            return continuation(details)

        def deny(request_iterator, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong auth token (tfg-auth-token metadata)")

        # A stream handler that never iterates its requests: the body of a refused call is
        # never read, so a client without the token cannot make the worker buffer gigabytes.
        if details.method.endswith("/RecvTensorChunks"):
            return grpc.stream_stream_rpc_method_handler(deny)
        return grpc.stream_unary_rpc_method_handler(deny)


class WorkerClient:
    """The RPC stub of one task, with its token attached and errors that name the task."""

    def __init__(self, task, address, token=None, tls_ca=None):
        self.task = task
        self.address = address
        self.label = f"task {task_label(task)} ({address})"
        if tls_ca:  # PEM bytes of the CA: the worker's certificate is verified
            creds = grpc.ssl_channel_credentials(root_certificates=tls_ca)
            self.channel = grpc.secure_channel(address, creds, options=OPTIONS)
        else:
            self.channel = grpc.insecure_channel(address, options=OPTIONS)
        self.stub = worker_pb2_grpc.WorkerServiceStub(self.channel)
        self.metadata = ((TOKEN_KEY, check_token(token)),) if token else ()

    def call(self, method, request, timeout=None):
        try:
            return busy.call(getattr(self.stub, method), request, timeout=timeout,
                             metadata=self.metadata)
        except grpc.RpcError as e:
            raise self.error(method, e) from None

    def call_async(self, method, request, timeout=None, done=None):
        """Run the call on a pool thread; `done(response or exception)` when it ends.
        (A blocking call on a thread costs half what a grpc future does: a future starts a
        channel thread per call when no other is in flight.)"""
        def run():
            try:
                result = busy.call(getattr(self.stub, method), request, timeout=timeout,
                                   metadata=self.metadata)
            except BaseException as e:  # noqa: BLE001 - handed to `done`
                result = e
            if done is not None:
                done(result)

        CALLS.submit(run)

    def recv_tensor(self, step_id, key, compress=""):
        """Pull one tensor -> (array or None, is_dead); large ones come in two calls: the
        answer with the first chunk, then a stream of the rest. `compress="bf16"`: a float32
        comes truncated to 16 bits a value and is widened here (tfg/schemas/truncate.py)."""
        req = pb.RecvTensorRequest(step_id=step_id, rendezvous_key=key, compress=compress)
        metadata = self.metadata + (busy.ASKS_AGAIN,)  # "ask again" answers welcome
        first = busy.call(self.stub.RecvTensor, req, metadata=metadata)
        while busy.asks_again(first):  # not sent within the worker's hold: ask again
            first = busy.call(self.stub.RecvTensor, req, metadata=metadata)
        more = None
        if not first.is_dead and first.total_bytes > len(first.tensor.tensor_content):
            more = self.stub.RecvTensorChunks(req, metadata=self.metadata)
        return assemble(itertools.chain([first], more or ()))

    def error(self, method, e):
        """An RpcError from `method` as the tfg error it means."""
        code = e.code() if hasattr(e, "code") else None
        details = " ".join(str(e.details() if hasattr(e, "details") else e).split())
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return TfgInputError(f"{self.label} refused {method}: {details} (give the "
                                 "worker's --auth-token or set TFG_AUTH_TOKEN)")
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return TfgInputError(f"{self.label}: {details}")
        if code == grpc.StatusCode.NOT_FOUND:
            return TfgRuntimeError(f"{self.label}: {details} (was the worker restarted? "
                                   "rerun to start a new session)")
        if code == grpc.StatusCode.ABORTED:
            return StepAborted(f"{self.label}: {details}")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:  # its --max-calls, or a size limit
            return TfgRuntimeError(f"{self.label} refused {method}: {details} (too many calls "
                                   "at once (its --max-calls), or a message over its size "
                                   "limit)")
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                    grpc.StatusCode.CANCELLED, None):
            what = "did not answer in time" if code == grpc.StatusCode.DEADLINE_EXCEEDED \
                else "is unreachable"
            return TaskUnreachable(f"{self.label} {what} ({method}: {details})")
        return TfgRuntimeError(f"{self.label} failed {method}: {code.name}: {details}")

    def close(self):
        self.channel.close()


def call_all(calls, timeout=None, strict=True):
    """{key: (client, method, request)} -> {key: response}, all calls at once. With `strict`
    the first failure (in key order) is raised as the tfg error naming its task; otherwise
    failures are returned as exceptions."""
    results, cond = {}, threading.Condition()
    for key, (client, method, request) in calls.items():
        def done(result, key=key):
            with cond:
                results[key] = result
                cond.notify_all()

        client.call_async(method, request, timeout, done)
    with cond:
        cond.wait_for(lambda: len(results) == len(calls))
    for key, (client, method, _) in calls.items():
        r = results[key]
        if isinstance(r, BaseException):
            err = client.error(method, r) if isinstance(r, grpc.RpcError) else r
            if strict:
                raise err
            results[key] = err
    return results


def health_handler(is_serving):
    """A generic handler serving grpc.health.v1.Health/Check with our wire-compatible
    messages; `is_serving()` says SERVING or NOT_SERVING."""
    def check(request, context):
        status = pb.HealthCheckResponse.SERVING if is_serving() else \
            pb.HealthCheckResponse.NOT_SERVING
        if request.service not in ("", "tfg.WorkerService"):
            status = pb.HealthCheckResponse.SERVICE_UNKNOWN
        return pb.HealthCheckResponse(status=status)

    return grpc.method_handlers_generic_handler(HEALTH_SERVICE, {
        "Check": grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=pb.HealthCheckRequest.FromString,
            response_serializer=pb.HealthCheckResponse.SerializeToString)})


def health_check(channel, timeout):
    """Call grpc.health.v1.Health/Check on `channel` -> the ServingStatus number."""
    method = channel.unary_unary(f"/{HEALTH_SERVICE}/Check",
                                 request_serializer=pb.HealthCheckRequest.SerializeToString,
                                 response_deserializer=pb.HealthCheckResponse.FromString)
    return method(pb.HealthCheckRequest(), timeout=timeout).status


# --- tensors ------------------------------------------------------------------------------
def _byte_layout(arr):
    """Whether `arr` travels as raw tensor_content (numbers and bools do; strings do not)."""
    return arr.dtype.kind in "biufc" or arr.dtype.name in ("float16", "bfloat16")


def first_chunk(value, is_dead, chunk_bytes=CHUNK_BYTES, compress=""):
    """-> (RecvTensor's answer: dtype, shape and the first chunk, or the whole tensor;
    the remaining bytes as a memoryview, or None when nothing is left). With
    compress="bf16" a float32 goes as its upper 16 bits per element (`truncated` set)."""
    if is_dead:
        return pb.RecvTensorResponse(is_dead=True), None
    if list_codec.is_variant(value):  # a DT_VARIANT TensorProto, as TensorFlow sends one
        return pb.RecvTensorResponse(tensor=list_codec.variant_to_proto(value)), None
    arr = np.asarray(value)
    truncated = compress == "bf16" and truncate.applies(arr)
    if truncated:
        arr = truncate.truncate(arr).reshape(arr.shape)
    if not _byte_layout(arr):
        try:
            tensor = encode(arr)
        except TfgRuntimeError as e:
            raise TfgRuntimeError(f"{e}: place the ops that use it on one task") from None
        return pb.RecvTensorResponse(tensor=tensor), None
    dtype = DType.from_numpy(arr.dtype)
    shape = arr.shape  # (ascontiguousarray makes a scalar 1-d)
    arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    data = memoryview(arr.reshape(-1)).cast("B") if arr.size else memoryview(b"")
    first = pb.RecvTensorResponse(total_bytes=len(data), truncated=truncated)
    first.tensor.dtype = int(dtype)
    tcodec.shape_to_proto(shape, first.tensor.tensor_shape)
    first.tensor.tensor_content = bytes(data[:chunk_bytes])
    return first, (data[chunk_bytes:] if len(data) > chunk_bytes else None)


def rest_chunks(rest, chunk_bytes=CHUNK_BYTES):
    """RecvTensorChunks' messages: the bytes after the first chunk, one chunk each."""
    for start in range(0, len(rest), chunk_bytes):
        msg = pb.RecvTensorResponse()
        msg.tensor.tensor_content = bytes(rest[start:start + chunk_bytes])
        yield msg


def tensor_chunks(value, is_dead, chunk_bytes=CHUNK_BYTES):
    """Every message of one value, first_chunk's answer then rest_chunks (for tests)."""
    first, rest = first_chunk(value, is_dead, chunk_bytes)
    yield first
    if rest is not None:
        yield from rest_chunks(rest, chunk_bytes)


def assemble(responses):
    """The inverse of tensor_chunks: an iterator of responses -> (array or None, is_dead)."""
    it = iter(responses)
    try:
        first = next(it)
    except StopIteration:
        raise TfgRuntimeError("RecvTensor returned no data") from None
    if first.is_dead:
        return None, True
    t = first.tensor
    if t.dtype == DType.VARIANT:
        return list_codec.variant_from_proto(t), False
    if t.dtype == DType.STRING or t.string_val:
        return tcodec.to_numpy(t), False
    dtype = DType(t.dtype).base.np
    shape = tcodec.shape_from_proto(t.tensor_shape)
    buf = bytearray(first.total_bytes)
    content = t.tensor_content
    buf[:len(content)] = content
    pos = len(content)
    for msg in it:
        content = msg.tensor.tensor_content
        buf[pos:pos + len(content)] = content
        pos += len(content)
    if pos != first.total_bytes:
        raise TfgRuntimeError(f"RecvTensor: got {pos} bytes of {first.total_bytes}")
    arr = np.frombuffer(buf, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False) \
        .reshape(shape)
    return (truncate.widen(arr, shape) if first.truncated else arr), False


def encode(value, proto=None):
    """A value as a TensorProto (numbers in tensor_content, a TensorList or an Optional as a
    variant)."""
    if list_codec.is_variant(value):
        return list_codec.variant_to_proto(value, proto)
    arr = np.asarray(value)
    if arr.dtype == object:
        for v in arr.ravel():
            if not isinstance(v, (bytes, str)):
                raise TfgRuntimeError(f"cannot send a {type(v).__name__} between tasks (only "
                                      "numbers, bools and strings travel)")
        return tcodec.from_numpy(arr, dtype=DType.STRING, proto=proto)
    if not _byte_layout(arr):
        arr = arr.astype(bytes).astype(object)
        return tcodec.from_numpy(arr, dtype=DType.STRING, proto=proto)
    proto = proto if proto is not None else tensor_pb2.TensorProto()
    proto.dtype = int(DType.from_numpy(arr.dtype))
    tcodec.shape_to_proto(arr.shape, proto.tensor_shape)
    proto.tensor_content = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")) \
        .tobytes()
    return proto


def decode(proto):
    """A TensorProto as a (writable) numpy array, or a TensorList / Optional for a variant."""
    if proto.dtype == DType.VARIANT:
        return list_codec.variant_from_proto(proto)
    arr = tcodec.to_numpy(proto)
    if isinstance(arr, np.ndarray) and not arr.flags.writeable:
        arr = arr.copy()
    return arr
