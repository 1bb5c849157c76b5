"""Stateful kernels: variables (ref and resource), optimizer updates on resources, stacks,
queues, random ops, the checkpoint file and SaveV2/RestoreV2, and kernel error messages."""
import threading
import time

import numpy as np
import pytest

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.graphdef.graph import Graph
from tfg.kernels import get_kernel
from tfg.kernels.checkpoint_format import (read_checkpoint, read_checkpoint_with_step,
                                           write_checkpoint)
from tfg.kernels.context import KernelContext
from tfg.kernels.resources import Ref, ResourceMgr, StepCancelled, StepContext, UninitializedError
from tfg.schemas.dtypes import DType

def run(op, *inputs, step=None, name=None, **attrs):
    """Run kernel `op` on `inputs` with `attrs` as a one-node graph would."""
    node = Graph().add_node(name or op.lower(), op)
    kd = get_kernel(op)
    ctx = KernelContext(node, attrs)
    if kd.needs_step:
        return kd.fn(ctx, step if step is not None else StepContext(), *inputs)
    return kd.fn(ctx, *inputs)


f32 = np.float32


# --------------------------------------------------------------------------- ref variables
def test_variable_lives_in_session_and_reads_uninitialized_fail():
    step = StepContext()
    v = run("VariableV2", step=step, name="w", shape=(3,), dtype=DType.FLOAT)
    assert v is run("VariableV2", step=StepContext(session_resources=step.session_resources),
                    name="w", shape=(3,), dtype=DType.FLOAT)
    assert not run("IsVariableInitialized", v)
    with pytest.raises(UninitializedError, match="uninitialized value w"):
        run("Identity", v.get())
    run("Assign", v, np.ones(3, f32))
    run("AssignAdd", v, np.full(3, 2, f32))
    run("AssignSub", v, np.ones(3, f32))
    np.testing.assert_array_equal(v.get(), [2, 2, 2])
    assert run("IsVariableInitialized", v)


def test_assign_copies_and_validates_shape():
    v = Ref("v", DType.FLOAT, (2,))
    value = np.zeros(2, f32)
    run("Assign", v, value)
    value[0] = 5  # the variable holds its own copy
    assert v.get()[0] == 0
    with pytest.raises(TfgRuntimeError, match="shapes of both tensors to match"):
        run("Assign", v, np.zeros(3, f32), validate_shape=True)
    run("Assign", v, np.zeros(3, f32), validate_shape=False)
    assert v.get().shape == (3,)
    with pytest.raises(UninitializedError):
        run("AssignAdd", Ref("u"), np.zeros(3, f32))


def test_ref_updates_write_the_buffer_reads_share():
    # TensorFlow's ref kernels write in place: a read (the buffer itself) sees the update.
    v = Ref("v", DType.FLOAT, (2, 2))
    run("Assign", v, np.zeros((2, 2), f32))
    read = run("Identity", v.get())
    run("AssignAdd", v, np.ones((2, 2), f32))
    run("AssignSub", v, np.full((2, 2), 3, f32))
    run("ApplyGradientDescent", v, f32(0.5), np.full((2, 2), 2, f32))
    np.testing.assert_array_equal(read, np.full((2, 2), -3, f32))
    run("Assign", v, np.arange(4, dtype=f32).reshape(4), validate_shape=False)
    assert v.get().shape == (4,) and np.shares_memory(v.get(), read)  # as many elements
    np.testing.assert_array_equal(read, [[0, 1], [2, 3]])
    run("Assign", v, np.ones(3, f32), validate_shape=False)  # another size: a new buffer
    np.testing.assert_array_equal(read, [[0, 1], [2, 3]])
    np.testing.assert_array_equal(v.get(), [1, 1, 1])


def test_ref_update_of_a_read_only_buffer_replaces_it():
    v = Ref("v", DType.INT32, ())
    frozen = np.array(4, np.int32)
    frozen.flags.writeable = False
    v.assign(frozen)  # (as a restore may leave it)
    run("AssignAdd", v, np.array(1, np.int32))
    assert int(v.get()) == 5 and int(frozen) == 4 and v.get().flags.writeable
    read = v.get()
    run("AssignAdd", v, np.array(1, np.int32))
    assert int(read) == 6  # from then on in place


def test_resource_variable_reads_keep_their_value():
    # A resource variable copies on write (TensorFlow's copy-on-read-write): no aliasing.
    step = StepContext()
    h = run("VarHandleOp", step=step, name="r", dtype=DType.FLOAT, shape=(2,))
    run("AssignVariableOp", h, np.ones(2, f32), dtype=DType.FLOAT)
    read = run("ReadVariableOp", h, dtype=DType.FLOAT)
    run("AssignAddVariableOp", h, np.ones(2, f32), dtype=DType.FLOAT)
    run("ResourceApplyGradientDescent", h, f32(1), np.ones(2, f32))
    np.testing.assert_array_equal(read, [1, 1])
    np.testing.assert_array_equal(run("ReadVariableOp", h, dtype=DType.FLOAT), [1, 1])


def test_shared_name_and_container_key_variables():
    mgr = ResourceMgr()
    a = run("VariableV2", step=StepContext(mgr), name="a", shared_name=b"s", container=b"c",
            shape=(), dtype=DType.FLOAT)
    b = run("VariableV2", step=StepContext(mgr), name="b", shared_name=b"s", container=b"c",
            shape=(), dtype=DType.FLOAT)
    assert a is b and mgr.lookup("c", "s") is a


# --------------------------------------------------------------------------- resource variables
def test_resource_variable_lifecycle():
    step = StepContext()
    h = run("VarHandleOp", step=step, name="rv", dtype=DType.FLOAT, shape=(2,))
    assert not run("VarIsInitializedOp", h)
    with pytest.raises(UninitializedError):
        run("ReadVariableOp", h, dtype=DType.FLOAT)
    run("AssignVariableOp", h, np.array([1, 2], f32), dtype=DType.FLOAT)
    run("AssignAddVariableOp", h, np.array([1, 1], f32), dtype=DType.FLOAT)
    run("AssignSubVariableOp", h, np.array([0.5, 0.5], f32), dtype=DType.FLOAT)
    np.testing.assert_allclose(run("ReadVariableOp", h, dtype=DType.FLOAT), [1.5, 2.5])
    with pytest.raises(TfgRuntimeError, match="wrong dtype"):
        run("ReadVariableOp", h, dtype=DType.INT32)
    assert run("VarIsInitializedOp", h)
    run("DestroyResourceOp", h)
    assert not run("VarIsInitializedOp", h)
    with pytest.raises(UninitializedError, match="does not exist"):
        run("ReadVariableOp", h, dtype=DType.FLOAT)


@pytest.mark.parametrize("name,nslots,args,attrs", [
    ("GradientDescent", 0, [f32(0.1)], {}),
    ("Momentum", 1, [f32(0.05), None, f32(0.9)], {"use_nesterov": True}),
    ("Adam", 2, [f32(0.9 ** 2), f32(0.999 ** 2), f32(0.01), f32(0.9), f32(0.999), f32(1e-7),
                 None], {}),
    ("RMSProp", 2, [f32(0.01), f32(0.9), f32(0.5), f32(1e-6), None], {}),
    ("Adagrad", 1, [f32(0.1), None], {"update_slots": True}),
    ("Momentum", 1, [f32(0.05), None, f32(0.9)], {}),
    ("Adam", 2, [f32(0.9 ** 2), f32(0.999 ** 2), f32(0.01), f32(0.9), f32(0.999), f32(1e-7),
                 None], {"use_nesterov": True}),
    ("Adagrad", 1, [f32(0.1), None], {"update_slots": False}),
    ("CenteredRMSProp", 3, [f32(0.01), f32(0.9), f32(0.5), f32(1e-6), None], {}),
    ("Adadelta", 2, [f32(0.5), f32(0.95), f32(1e-6), None], {}),
    ("AdagradV2", 1, [f32(0.1), f32(1e-7), None], {}),
    ("AdaMax", 2, [f32(0.9 ** 2), f32(0.01), f32(0.9), f32(0.999), f32(1e-7), None], {}),
])
def test_resource_apply_matches_ref_apply(name, nslots, args, attrs):
    # The same values bit for bit; the ref form writes the variable's and slots' buffers.
    rng = np.random.default_rng(0)
    init = [rng.uniform(0.1, 0.3, 4).astype(f32) for _ in range(1 + nslots)]  # (ms > mg ** 2)
    grad = rng.standard_normal(4).astype(f32)
    full = [grad if a is None else a for a in args]
    if name == "GradientDescent":
        full = [args[0], grad]
    refs = [Ref(f"r{i}") for i in range(len(init))]
    for r, v in zip(refs, init):
        r.assign(v.copy())
    buffers = [r.get() for r in refs]
    out = run("Apply" + name, *refs, *full, **attrs)
    assert out is refs[0] and all(r.get() is b for r, b in zip(refs, buffers))
    step = StepContext()
    handles = []
    for i, v in enumerate(init):
        h = run("VarHandleOp", step=step, name=f"{name}_h{i}", dtype=DType.FLOAT, shape=(4,))
        run("AssignVariableOp", h, v.copy(), dtype=DType.FLOAT)
        handles.append(h)
    assert run("ResourceApply" + name, *handles, *full, **attrs) == ()
    for r, h in zip(refs, handles):
        got = run("ReadVariableOp", h, dtype=DType.FLOAT)
        np.testing.assert_array_equal(got, r.get())
        assert got.dtype == np.float32


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_apply_gradient_descent_of_any_rank(shape):
    """A scalar variable too (its product alpha * delta is a numpy scalar, not an array)."""
    v = Ref("v")
    v.assign(np.full(shape, 1.0, f32))
    run("ApplyGradientDescent", v, f32(0.5), np.full(shape, 0.25, f32))
    np.testing.assert_array_equal(v.get(), np.full(shape, 0.875, f32))


def test_apply_refuses_mismatched_grad():
    v = Ref("v")
    v.assign(np.zeros(3, f32))
    with pytest.raises(TfgRuntimeError, match="same shape"):
        run("ApplyGradientDescent", v, f32(0.1), np.zeros(4, f32))


# --------------------------------------------------------------------------- stacks
def test_stack_push_pop_and_errors():
    step = StepContext()
    h = run("StackV2", np.int32(2), step=step, stack_name=b"s", elem_type=DType.FLOAT)
    assert len(step.resources.items()) == 1  # step-scoped
    a, b = np.ones(2, f32), np.zeros(3, f32)
    assert run("StackPushV2", h, a) is a
    run("StackPushV2", h, b)
    with pytest.raises(TfgRuntimeError, match="overflowed its max_size"):
        run("StackPushV2", h, a)
    assert run("StackPopV2", h, elem_type=DType.FLOAT) is b
    assert run("StackPopV2", h, elem_type=DType.FLOAT) is a
    with pytest.raises(TfgRuntimeError, match=r"Stack\[s\] is empty"):
        run("StackPopV2", h, elem_type=DType.FLOAT)
    run("StackCloseV2", h)
    with pytest.raises(TfgRuntimeError, match="closed"):
        run("StackPushV2", h, a)


# --------------------------------------------------------------------------- queues
def _fifo(step, **attrs):
    attrs.setdefault("component_types", [DType.FLOAT, DType.INT32])
    return run("FIFOQueueV2", step=step, **attrs)


def test_fifo_queue_order_size_and_close():
    step = StepContext()
    q = _fifo(step, capacity=10)
    run("QueueEnqueueManyV2", q, np.arange(3, dtype=f32), np.arange(3, dtype=np.int32),
        step=step)
    run("QueueEnqueueV2", q, f32(7), np.int32(7), step=step)
    assert run("QueueSizeV2", q) == 4
    x, y = run("QueueDequeueV2", q, step=step)
    assert x == 0 and y == 0 and x.dtype == np.float32
    xs, ys = run("QueueDequeueManyV2", q, np.int32(2), step=step)
    np.testing.assert_array_equal(xs, [1, 2])
    run("QueueCloseV2", q)
    with pytest.raises(TfgRuntimeError, match="is closed"):
        run("QueueEnqueueV2", q, f32(1), np.int32(1), step=step)
    with pytest.raises(TfgRuntimeError,
                       match=r"closed and has insufficient elements \(requested 2, current size 1"):
        run("QueueDequeueManyV2", q, np.int32(2), step=step)
    assert run("QueueDequeueV2", q, step=step)[0] == 7


def test_queue_checks_dtypes():
    step = StepContext()
    q = _fifo(step)
    with pytest.raises(TfgRuntimeError, match="should be int32"):
        run("QueueEnqueueV2", q, f32(1), f32(1), step=step)


def test_blocked_dequeue_wakes_on_close_and_on_cancel():
    step = StepContext()
    q = _fifo(step, name="q2")
    errors = []

    def consumer(st):
        try:
            run("QueueDequeueV2", q, step=st)
        except TfgRuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=consumer, args=(step,))
    t.start()
    time.sleep(0.1)
    run("QueueCloseV2", q)
    t.join(5)
    assert not t.is_alive() and "closed" in str(errors[0])

    q3 = _fifo(step, name="q3")
    step2 = StepContext(session_resources=step.session_resources)
    t = threading.Thread(target=lambda: errors.append(_catch(q3, step2)))
    t.start()
    time.sleep(0.1)
    step2.cancelled.set()
    t.join(5)
    assert not t.is_alive() and isinstance(errors[-1], StepCancelled)


def _catch(q, step):
    try:
        run("QueueDequeueV2", q, step=step)
    except TfgRuntimeError as e:
        return e


def test_dequeue_timeout_and_blocking_enqueue():
    step = StepContext()
    q = _fifo(step, name="q4", capacity=1)
    with pytest.raises(TfgRuntimeError, match="Timed out"):
        run("QueueDequeueV2", q, step=step, timeout_ms=50)
    run("QueueEnqueueV2", q, f32(1), np.int32(1), step=step)
    with pytest.raises(TfgRuntimeError, match="Timed out"):
        run("QueueEnqueueV2", q, f32(2), np.int32(2), step=step, timeout_ms=50)


def test_random_shuffle_queue_returns_every_element_once():
    step = StepContext()
    q = run("RandomShuffleQueueV2", step=step, component_types=[DType.INT32], capacity=100,
            min_after_dequeue=0, seed=1, seed2=2)
    run("QueueEnqueueManyV2", q, np.arange(20, dtype=np.int32), step=step)
    (got,) = run("QueueDequeueManyV2", q, np.int32(20), step=step)
    assert sorted(got.tolist()) == list(range(20)) and got.tolist() != list(range(20))


# --------------------------------------------------------------------------- random
def test_random_ops_shapes_ranges_and_seeds():
    step = StepContext()
    shape = np.array([1000], np.int32)
    u = run("RandomUniform", shape, step=step, name="u", dtype=DType.FLOAT, seed=1, seed2=2)
    assert u.dtype == np.float32 and u.shape == (1000,) and 0 <= u.min() and u.max() < 1
    u2 = run("RandomUniform", shape, step=step, name="u", dtype=DType.FLOAT, seed=1, seed2=2)
    assert not np.array_equal(u, u2)  # the state advances within a session
    fresh = StepContext()
    again = run("RandomUniform", shape, step=fresh, name="u", dtype=DType.FLOAT, seed=1, seed2=2)
    np.testing.assert_array_equal(u, again)  # a seed pair reproduces across sessions
    n = run("RandomStandardNormal", shape, step=step, name="n", dtype=DType.DOUBLE, seed=3)
    assert n.dtype == np.float64 and abs(n.mean()) < 0.2 and 0.8 < n.std() < 1.2
    t = run("TruncatedNormal", shape, step=step, name="t", dtype=DType.FLOAT, seed=4)
    assert np.abs(t).max() <= 2
    i = run("RandomUniformInt", shape, np.int64(-3), np.int64(4), step=step, name="i", seed=5)
    assert i.dtype == np.int64 and i.min() == -3 and i.max() == 3
    a = run("RandomUniform", shape, step=StepContext(), name="z", dtype=DType.FLOAT)
    b = run("RandomUniform", shape, step=StepContext(), name="z", dtype=DType.FLOAT)
    assert not np.array_equal(a, b)  # seeds 0, 0: fresh randomness


# --------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip(tmp_path):
    path = tmp_path / "sub" / "ckpt"
    tensors = {"w": np.arange(6, dtype=f32).reshape(2, 3), "step": np.int64(5),
               "flag": np.array([True, False]), "names": np.array([b"a", b"bc"], dtype=object)}
    write_checkpoint(path, tensors, step=42)
    got, step = read_checkpoint_with_step(path)
    assert step == 42 and set(got) == set(tensors)
    for k, v in tensors.items():
        assert got[k].dtype == np.asarray(v).dtype
        np.testing.assert_array_equal(got[k], v)
    write_checkpoint(path, {"w": np.zeros(1, f32)})
    assert read_checkpoint_with_step(path)[1] is None
    assert [p.name for p in path.parent.iterdir()] == ["ckpt"]  # no temp file left


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty", "short"])
def test_corrupt_checkpoint_refused(tmp_path, damage):
    path = tmp_path / "ckpt"
    write_checkpoint(path, {"w": np.arange(100, dtype=f32)})
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:-7]
    elif damage == "flip":
        data[-3] ^= 0xFF
    elif damage == "magic":
        data[0:3] = b"XYZ"
    elif damage == "empty":
        data = b""
    else:
        data = data[:10]
    path.write_bytes(bytes(data))
    with pytest.raises(TfgInputError, match="ckpt"):
        read_checkpoint(path)


def test_missing_checkpoint(tmp_path):
    with pytest.raises(TfgInputError, match="no checkpoint"):
        read_checkpoint(tmp_path / "nope")


def test_save_v2_restore_v2(tmp_path):
    prefix = np.array(str(tmp_path / "model").encode(), dtype=object)
    names = np.array([b"w", b"b"], dtype=object)
    slices = np.array([b"", b""], dtype=object)
    w, b = np.ones((2, 2), f32), np.arange(3, dtype=np.int32)
    assert run("SaveV2", prefix, names, slices, w, b) == ()
    out = run("RestoreV2", prefix, names[::-1].copy(), slices,
              dtypes=[DType.INT32, DType.FLOAT])
    np.testing.assert_array_equal(out[0], b)
    np.testing.assert_array_equal(out[1], w)
    with pytest.raises(TfgRuntimeError, match="Key x not found"):
        run("RestoreV2", prefix, np.array([b"x"], dtype=object), np.array([b""], dtype=object),
            dtypes=[DType.FLOAT])
    with pytest.raises(TfgRuntimeError, match="slices"):
        run("SaveV2", prefix, np.array([b"w"], dtype=object), np.array([b"2 0,1"], dtype=object),
            w)


# --------------------------------------------------------------------------- errors
def test_placeholder_must_be_fed():
    with pytest.raises(TfgInputError, match="You must feed a value for placeholder tensor 'x'"):
        run("Placeholder", name="x", dtype=DType.FLOAT, shape=(None, 3))


def test_check_numerics_and_assert():
    with pytest.raises(TfgRuntimeError, match="bad : Tensor had NaN values"):
        run("CheckNumerics", np.array([1, np.nan], f32), message=b"bad")
    assert run("Assert", np.bool_(True), np.array([1, 2])) == ()
    with pytest.raises(TfgRuntimeError, match=r"assertion failed: x \[1 2\]"):
        run("Assert", np.bool_(False), np.array([b"x"], dtype=object)[0:1].reshape(()),
            np.array([1, 2]))


def test_sparse_xent_label_out_of_range():
    with pytest.raises(TfgRuntimeError, match=r"label value of 5 which is outside the valid "
                                              r"range of \[0, 5\)"):
        run("SparseSoftmaxCrossEntropyWithLogits", np.zeros((2, 5), f32),
            np.array([1, 5], np.int32))


@pytest.mark.parametrize("op,args,match", [
    ("AddV2", (np.zeros(3, f32), np.zeros(4, f32)), "Incompatible shapes: \\[3\\] vs. \\[4\\]"),
    ("FloorDiv", (np.array([1], np.int32), np.array([0], np.int32)), "division by zero"),
    ("MatMul", (np.zeros((2, 3), f32), np.zeros((2, 3), f32)), "size-incompatible"),
    ("Reshape", (np.zeros(6, f32), np.array([4, -1], np.int32)), "6 values"),
    ("GatherV2", (np.zeros((3, 2), f32), np.array([3], np.int32), np.int32(0)),
     "not in \\[0, 3\\)"),
    ("Sum", (np.zeros((2, 2), f32), np.int32(2)), "out of range"),
    ("Pow", (np.array([2], np.int32), np.array([-1], np.int32)), "negative integer powers"),
    ("EnsureShape", (np.zeros((2, 3), f32),), "not compatible"),
])
def test_errors_are_one_line_runtime_errors(op, args, match):
    attrs = {"shape": (3, 3)} if op == "EnsureShape" else {}
    with pytest.raises(TfgRuntimeError, match=match) as info:
        run(op, *args, **attrs)
    assert "\n" not in str(info.value)


def test_unsupported_dtype_is_named():
    with pytest.raises(TfgRuntimeError, match="int32"):
        run("Elu", np.array([1], np.int32))


def test_const_is_read_only_and_typed():
    out = run("Const", value=np.array([1.5, 2.5], f32), dtype=DType.FLOAT)
    assert out.dtype == np.float32 and not out.flags.writeable
