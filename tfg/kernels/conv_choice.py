"""Per kernel: whether its parts on a step's threads beat one call, from its own timings.

    chooser = Chooser()                 # one per prepared kernel and signature
    way = chooser.pick()                # True: the threaded way
    t = perf_counter(); ...; chooser.record(way, perf_counter() - t)

Why: whether two threads pay for a kernel of 0.1-4 ms depends on the machine more than on
the shape: on this project's 2-vCPU machine a 1024x1024 GEMM runs only 1.46x faster on both,
a helper thread's wake-up and the GIL cost 10-20 us a call, and with other processes on the
cores a part waits for a time slice (measured 1.1-3.2x slower than one call). No threshold
fits every machine, so each kernel times both ways on its first calls and keeps the faster.
"""


class Chooser:
    """Per prepared kernel and signature: whether its parts on threads beat one call, by the
    wall time of its own calls. The first calls alternate the two ways (the first of each
    not counted: helper start-up, first allocations), PROBES counted each, or fewer when the
    threaded one is already SLOW times the other (a busy machine: probing costs); then the
    faster median is used, the other way re-timed once every REPROBE calls (a machine that
    gets busier or quieter moves the choice). Threads must be faster by MARGIN: they cost
    more CPU.

        way = chooser.pick()            # True: threaded
        ... ; chooser.record(way, seconds)
    """

    PROBES = 2
    REPROBE = 16
    MARGIN = 0.95
    SLOW = 1.5

    __slots__ = ("times", "seen", "calls", "threaded", "decided")

    def __init__(self):
        self.times = ([], [])  # recent wall times: serial, threaded
        self.seen = [0, 0]
        self.calls = 0
        self.threaded = False
        self.decided = False

    def pick(self):
        self.calls += 1
        if not self.decided:
            s, t = self.seen
            return t < s
        if self.calls % self.REPROBE == 0:
            return not self.threaded
        return self.threaded

    def record(self, threaded, seconds):
        i = int(bool(threaded))
        self.seen[i] += 1
        if self.seen[i] == 1:
            return  # the first call of each way: start-up, not speed
        times = self.times[i]
        times.append(seconds)
        if len(times) > self.PROBES + 1:
            del times[0]
        s, t = self.times
        if not (s and t):
            return
        ms, mt = _median(s), _median(t)
        if self.decided or (len(s) >= self.PROBES and len(t) >= self.PROBES):
            self.decided = True
            self.threaded = mt < self.MARGIN * ms
        elif mt > self.SLOW * ms:
            self.decided, self.threaded = True, False


def _median(v):
    v = sorted(v)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else 0.5 * (v[mid - 1] + v[mid])
