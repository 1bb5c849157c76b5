"""Reference variables updated in place, as TensorFlow's ref kernels update them.

TensorFlow hands a kernel that takes a ref edge by value (`w/read`, the Identity of a
VariableV2, or any op reading the ref) the variable's buffer itself, not a copy. AssignAdd,
AssignSub, the Apply* optimizers and an Assign of as many elements as the variable holds then
write into that buffer, so a read made earlier in the step sees the update (a TF1 training
loop's `w/read`, entered once, gives each iteration the weights the previous one left):

    r = Identity(w)          # r is w's buffer
    AssignAdd(w, 1)          # the buffer + 1, in place
    Identity(r) after it     # sees the + 1, as in TensorFlow

An Assign of another number of elements (validate_shape=False) gives the variable a new
buffer: a read made before keeps the old one. A buffer that cannot be written (an array a
checkpoint restore decoded read-only, a numpy scalar) is replaced the same way, and written in
place from then on.

Resource variables are not updated here: TensorFlow copies a resource variable's buffer on
write while a read still holds it, which tfg's new array per update (state_ops.py) gives.
"""

# The ops whose kernels write a variable's buffer in place (what a compiled loop asks before it
# keeps a value read from a variable as a loop invariant: tfg/executor/ref_aliases.py).
IN_PLACE_OPS = set()


def writes_in_place(*ops):
    """Record `ops` as writing reference variables in place (their kernels call update/write)."""
    IN_PLACE_OPS.update(ops)


def writable(xp, a):
    """Whether `a` is an array of `xp` that may be written in place."""
    return isinstance(a, xp.ndarray) and getattr(a.flags, "writeable", True)


def update(xp, ref, ufunc, value):
    """ref's buffer <- ufunc(buffer, value) in place (AssignAdd: xp.add); the caller holds
    ref.lock and has checked the shapes."""
    old = ref.get()
    if writable(xp, old) and xp.result_type(old, value) == old.dtype:
        ufunc(old, value, out=old)
    else:
        ref.assign(xp.asarray(ufunc(old, value)))  # (a 0-d result: an array)


def write(xp, ref, value, fresh_copy):
    """ref's buffer <- value: copied into the buffer when it holds as many elements (reshaped
    to value's shape, TensorFlow's Assign), else a new buffer `fresh_copy(value)`. The caller
    holds ref.lock and has validated the shapes it must."""
    old = ref.value
    if (old is not None and writable(xp, old) and old.size == value.size
            and old.dtype == value.dtype and old.flags.c_contiguous):
        target = old if old.shape == value.shape else old.reshape(value.shape)
        xp.copyto(target, value)
        if target is not old:
            ref.assign(target)  # the same buffer, seen in the new shape
    else:
        ref.assign(fresh_copy(value))
