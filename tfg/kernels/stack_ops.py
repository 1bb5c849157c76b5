"""Stacks (StackV2, StackPushV2, StackPopV2, StackCloseV2): what while-loop gradients use to
hand forward values to the backward loop, last in first out.

    h = StackV2(max_size=-1, elem_type=float, stack_name="s")
    StackPushV2(h, x) -> x;  StackPopV2(h) -> x;  StackPopV2(h) again -> error "Stack[s] is empty."

A stack belongs to one step: StackV2 makes a new one each time it runs and registers it in
`step.resources`, so it is released when the step ends. The handle is the Stack itself.
"""
import itertools
import threading

import numpy as np

from tfg.kernels import stack_swap
from tfg.kernels._util import fail, s
from tfg.kernels.registry import ALL_DEVICES, kernel


class Stack:
    __slots__ = ("name", "max_size", "elem_type", "items", "closed", "lock")

    def __init__(self, name, max_size=-1, elem_type=None):
        self.name = name
        self.max_size = max_size
        self.elem_type = elem_type
        self.items = []
        self.closed = False
        self.lock = threading.Lock()

    # (push and pop test inline: a gradient loop calls them once per iteration and value)
    def push(self, value):
        with self.lock:
            if self.closed:
                self._check_open()
            if 0 <= self.max_size <= len(self.items):
                fail(f"Stack[{self.name}] overflowed its max_size ({self.max_size})")
            self.items.append(value)

    def pop(self):
        with self.lock:
            if self.closed:
                self._check_open()
            if not self.items:
                fail(f"Stack[{self.name}] is empty.")
            return self.items.pop()

    def close(self):
        with self.lock:
            self.closed = True
            self.items.clear()

    def _check_open(self):
        if self.closed:
            fail(f"Stack[{self.name}] has already been closed.")

    def __repr__(self):
        return f"<Stack {self.name} size={len(self.items)}>"


_ids = itertools.count()


def _stack(handle):
    if not isinstance(handle, Stack):
        fail(f"expected a stack handle, got {type(handle).__name__}")
    return handle


@kernel("StackV2", device_types=ALL_DEVICES, host_only=True, needs_step=True)
def stack_v2(ctx, step, max_size):
    name = s(ctx.attrs.get("stack_name", b"")) or ctx.name
    stack = Stack(name, int(np.asarray(max_size)), ctx.attrs.get("elem_type"))
    step.resources.get_or_create("_stacks", f"{name}_{next(_ids)}", lambda: stack)
    return stack


# On a GPU the stack itself is a host object, as in TensorFlow; pushed tensors stay in the
# memory they were computed in (a device array stays on the device), unless swap_memory moves
# them to host memory meanwhile (stack_swap.py).
@kernel("StackPushV2", device_types=ALL_DEVICES)
def stack_push_v2(ctx, handle, elem):
    stack = _stack(handle)
    stack.push(stack_swap.swap_out(ctx.xp, elem) if ctx.attrs.get("swap_memory") else elem)
    return elem


@kernel("StackPopV2", device_types=ALL_DEVICES)
def stack_pop_v2(ctx, handle):
    stack = _stack(handle)
    return stack_swap.swap_in(stack, stack.pop())


@kernel("StackCloseV2", device_types=ALL_DEVICES, host_only=True)
def stack_close_v2(ctx, handle):
    _stack(handle).close()
    return ()
