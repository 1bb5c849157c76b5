"""A step's trace as a Chrome trace (chrome://tracing, Perfetto): one complete event per node.

    >>> doc = chrome_trace(session.last_trace)
    >>> doc["traceEvents"][0]
    {'name': 'MatMul', 'cat': 'MatMul', 'ph': 'X', 'ts': 0.0, 'dur': 41.2, 'pid': 0, 'tid': 0,
     'args': {'op': 'MatMul', 'device': '/job:localhost/replica:0/task:0/device:CPU:0'}}
    >>> doc["metadata"]["peak_memory_bytes"]
    3211264

pid is the device (named by a process_name event), tid the thread that ran the node.
`MemoryMeter` is how both executors count a traced step's live tensor bytes.
"""
import json

from tfg.graphdef.io import write_bytes_atomic


class MemoryMeter:
    """Live tensor bytes and their peak: an array counts once however many places hold it,
    and leaves when the last releases it.

        >>> m = MemoryMeter(); m.hold(a); m.hold(a); m.release(a); m.live, m.peak  # a: 4 KiB
        (4096, 4096)
    """

    __slots__ = ("held", "live", "peak")

    def __init__(self):
        self.held = {}  # id(array) -> [array, holders]
        self.live = 0
        self.peak = 0

    def hold(self, value):
        nbytes = getattr(value, "nbytes", 0)
        if not nbytes:
            return
        entry = self.held.get(id(value))
        if entry is None:
            self.held[id(value)] = [value, 1]
            self.live += nbytes
            if self.live > self.peak:
                self.peak = self.live
        else:
            entry[1] += 1

    def release(self, value):
        entry = self.held.get(id(value))
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                del self.held[id(value)]
                self.live -= value.nbytes


class StepTrace:
    """What `run(..., trace=True)` leaves in `session.last_trace`: per-node timings, peak memory."""

    def __init__(self, events, peak_bytes, devices, device_peaks=None):
        self.events = events  # (name, op, device, start_ns, dur_ns, thread[, output bytes])
        self.peak_bytes = peak_bytes
        self.devices = devices
        self.device_peaks = device_peaks or {}  # device -> its executor's peak live bytes


def chrome_trace(step_trace):
    """The trace document (a dict) of a `StepTrace`."""
    events = sorted(step_trace.events, key=lambda e: e[3])
    t0 = events[0][3] if events else 0
    devices = list(step_trace.devices)
    for e in events:
        if e[2] not in devices:
            devices.append(e[2])
    pid = {d: i for i, d in enumerate(devices)}
    tids = {}
    out = []
    for name, op, device, start, dur, thread, *_ in events:  # + output bytes (local)
        tid = tids.setdefault((device, thread), len(tids))
        out.append({"name": name, "cat": op, "ph": "X", "ts": (start - t0) / 1000.0,
                    "dur": dur / 1000.0, "pid": pid[device], "tid": tid,
                    "args": {"op": op, "device": device}})
    for d, i in pid.items():
        out.append({"name": "process_name", "ph": "M", "pid": i, "args": {"name": d}})
    for (device, _), tid in tids.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid[device], "tid": tid,
                    "args": {"name": f"thread {tid}"}})
    total = sum(e[4] for e in events)
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "metadata": {"peak_memory_bytes": int(step_trace.peak_bytes),
                         "devices": devices, "nodes": len(events),
                         "kernel_time_us": total / 1000.0}}


def write_chrome_trace(step_trace, path):
    """Write the trace as JSON to `path`, atomically."""
    data = json.dumps(chrome_trace(step_trace), indent=None).encode()
    write_bytes_atomic(path, data)
