"""A worker at its --max-calls: calls that wait their turn instead of failing the step.

A worker serves at most --max-calls RPCs at once and refuses the rest at once (gRPC's
RESOURCE_EXHAUSTED "Concurrent RPC limit exceeded!", before any handler runs, so a refused
call had no effect and may be sent again). A step of a large partitioned graph legitimately
has more tensors in flight to one peer than that: a Keras RNN's gradient split over two
tasks pulls ~360 of them, one RecvTensor each, all issued when the step starts. Two rules make
such a step finish instead of failing on the 257th pull:

- the worker holds a RecvTensor at most RECV_HOLD_S for a value not sent yet, then takes
  its request back from the rendezvous (nothing is lost: a value sent meanwhile is still
  answered) and answers an empty RecvTensorResponse, "ask again", freeing the thread. Only
  a caller that says it asks again (the metadata ASKS_AGAIN, which tfg's client sends) gets
  that answer: TensorFlow's own workers pulling from a tfg worker in a mixed cluster would
  read an empty response as a tensor, so theirs are held until the value is sent, as
  before;
- a client refused for the concurrency limit sleeps a short, growing, jittered backoff and
  calls again, for at most BUSY_RETRY_S in all (then the refusal is the error, as before).

Before: 363 pulls to a --max-calls 256 worker -> "refused RecvTensor: Concurrent RPC limit
exceeded!". After: at most 256 served at once; the others wait their turn and the step ends.
"""
import random
import time

import grpc

RECV_HOLD_S = 0.5  # the longest a worker thread waits in RecvTensor for a value
# gRPC metadata of a RecvTensor whose caller understands "ask again" (tfg's WorkerClient)
ASKS_AGAIN = ("tfg-asks-again", "1")
BUSY_RETRY_S = 120.0  # how long a refused call keeps asking before the refusal is the error
_BACKOFF_S = (0.005, 0.25)  # first and largest sleep between tries


def is_busy(error):
    """Whether an RpcError is the worker's concurrency limit (not a message-size limit)."""
    return (isinstance(error, grpc.RpcError) and hasattr(error, "code")
            and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            and "Concurrent RPC limit" in str(error.details() if hasattr(error, "details")
                                              else error))


def call(fn, request, **kwargs):
    """fn(request, **kwargs), sent again while the worker refuses it for being busy."""
    sleep, give_up = _BACKOFF_S[0], time.monotonic() + BUSY_RETRY_S
    while True:
        try:
            return fn(request, **kwargs)
        except grpc.RpcError as e:
            if not is_busy(e) or time.monotonic() + sleep > give_up:
                raise
        time.sleep(sleep * random.uniform(0.5, 1.5))  # jitter: refused callers spread out
        sleep = min(sleep * 2, _BACKOFF_S[1])


def caller_asks_again(context):
    """Whether the caller of an RPC sent ASKS_AGAIN (a tfg client, not TensorFlow's)."""
    try:
        return ASKS_AGAIN in tuple(context.invocation_metadata() or ())
    except Exception:  # noqa: BLE001 - a context without metadata: hold, as for TensorFlow
        return False


def asks_again(response):
    """Whether a RecvTensorResponse is the worker's "not sent yet, ask again" (no tensor,
    not dead: every answer with a value carries its dtype in `tensor`)."""
    return not response.is_dead and not response.HasField("tensor")
