"""Checked fields of a Chrome trace's events (`tfg run --trace` writes them; `tfg render
--trace` and `tfg export tensorboard --trace` read them back, possibly from someone else).

    >>> event_times({"ph": "X", "ts": 3.0, "dur": 41.2, "tid": 0}, 0)
    (3.0, 41.2, 0)
    >>> event_times({"ph": "X", "ts": "a"}, 7)
    TfgInputError: trace event 7: 'ts' must be a number of microseconds, got 'a'
"""
import math

from tfg.errors import TfgInputError

MAX_MICROSECONDS = 1e15  # about 31 years: past it a value is no time a trace measured


def event_args(event, index):
    """The event's 'args' object ({} when absent)."""
    args = event.get("args")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise TfgInputError(f"trace event {index}: 'args' must be an object, got {args!r:.40}")
    return args


def event_times(event, index):
    """(start us, duration us, thread id) of trace event number `index`: finite numbers, not
    negative, a thread id that is an integer (kept to 32 bits, as TensorFlow's StepStats)."""
    def number(key):
        v = event.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not 0 <= v <= MAX_MICROSECONDS:
            raise TfgInputError(f"trace event {index}: {key!r} must be a number of "
                                f"microseconds, got {v!r:.40}")
        return float(v)
    tid = event.get("tid", 0)
    if isinstance(tid, bool) or not isinstance(tid, int):
        raise TfgInputError(f"trace event {index}: 'tid' must be an integer, got {tid!r:.40}")
    return number("ts"), number("dur"), tid & 0xFFFFFFFF
