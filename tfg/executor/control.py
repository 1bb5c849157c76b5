"""The executor's own ops, which have no kernel: the control-flow primitives (Switch, Merge,
Enter, Exit, NextIteration, LoopCond), ControlTrigger, NoOp and feeds, as one table keyed by
the plan's kind. Each entry computes a node's outputs from its arguments; where the outputs go
(another frame for Enter/Exit, the next iteration for NextIteration) is the executor's
propagation (tfg/executor/executor.py), and _Send/_Recv talk to the rendezvous there.

    >>> BUILTINS[SWITCH](run, switch_item, [data, np.bool_(True)])
    [NOVAL, data]                 # output 1 is live: the predicate was true
    >>> BUILTINS[MERGE](run, merge_item, [NOVAL, x])
    [x, 1]                        # the first live input and its index

A Ref flows through as a Ref only where the op's output is a reference (RefSwitch, RefEnter,
...); otherwise its value is read here, at the time the op runs.
"""
import numpy as np

from tfg.executor import plan as P
from tfg.executor.devices import to_host
from tfg.kernels.resources import Ref


class _NoValue:
    __slots__ = ()

    def __repr__(self):
        return "NOVAL"


NOVAL = _NoValue()  # a dead output
_INDEX = tuple(np.int32(i) for i in range(8))  # Merge's value_index outputs


def forward(run, item, args):
    """Enter, Exit, NextIteration, LoopCond: output 0 is input 0."""
    value = args[0]
    if type(value) is Ref and not item.keeps_ref:
        value = value.get()
    return [value]


def switch(run, item, args):
    """Switch(data, pred): data on output 1 when pred is true, else on output 0."""
    data, pred = args
    if type(pred) is Ref:
        pred = pred.get()
    if type(data) is Ref and not item.keeps_ref:
        data = data.get()
    if not isinstance(pred, (np.ndarray, np.generic, bool)):
        pred = to_host(pred)  # a predicate computed on a GPU
    return [NOVAL, data] if bool(pred) else [data, NOVAL]


def merge(run, item, args):
    """Merge: the first live input and its index; dead when none is live."""
    for i, value in enumerate(args):
        if value is not NOVAL:
            if type(value) is Ref and not item.keeps_ref:
                value = value.get()
            return [value, _INDEX[i] if i < len(_INDEX) else np.int32(i)]
    return [NOVAL, NOVAL]


def feed(run, item, args):
    return [run.feed_values[item.feed_index]]


def nothing(run, item, args):
    """NoOp, ControlTrigger: no outputs; their successors wait only for them to run."""
    return []


BUILTINS = {P.ENTER: forward, P.EXIT: forward, P.NEXT: forward, P.IDENT: forward,
            P.SWITCH: switch, P.MERGE: merge, P.FEED: feed, P.NOOP: nothing,
            P.TRIGGER: nothing}
