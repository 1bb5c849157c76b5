"""oneDNN, the convolution library TensorFlow's CPU kernels use, called through its C API
where the optional `onednn-cpu-gomp` wheel is installed (`pip install 'tfg[perf]'`); tfg runs
the same graphs without it, on its numpy kernels.

    conv = onednn.convolution(x_shape, w_shape, g, nchw=False, bias=True)
    y = conv(x, w, b)        # conv is None where oneDNN is absent, off, or has no kernel

Why: a convolution through im2col and OpenBLAS packs the whole filter for every call, which
is most of the work when the output has few positions (ResNet50's last block at 96x96, batch
2: 18 rows against a 4608x512 filter, 36 GFLOP/s on one thread), and two BLAS threads split
those few rows. oneDNN's direct kernels keep the filter in their own blocked layout, made
once per filter, and add the bias in their output loop: 89 GFLOP/s on the same layer, 130 on
two threads (docs/performance.md). Activations stay tfg's own, in place after the call
(oneDNN's ReLU maps NaN to 0, where TensorFlow's keeps it).

The library is found in the Python environment's `lib` folder (where the wheel puts it), the
user's, or the system's, or at $TFG_ONEDNN_LIBRARY; it is loaded at the first convolution.
`TFG_ONEDNN=0` turns it off. A library that fails to load, or a call that fails, turns it off
for the process with one line on stderr, and the numpy kernels run; so does fork() in the
child of a process that has used it (its OpenMP runtime would hang there). Only oneDNN's
version 3 API is used: memory descriptors are opaque handles, so no struct layout is assumed.

Threads: oneDNN's OpenMP team follows the BLAS thread count that the Session's meter sets
for the step (tfg/executor/blas.py calls `set_threads`); OpenMP keeps that count per calling
thread, so it is applied on the thread that runs the convolution.
"""
import contextlib
import ctypes
import os
import site
import sys
import threading
import weakref

import numpy as np

from tfg.kernels._util import immutable

ENV_VAR = "TFG_ONEDNN"
LIBRARY_ENV_VAR = "TFG_ONEDNN_LIBRARY"
_SONAME = "libdnnl.so.3"

# oneDNN v3 C API constants (dnnl_common_types.h, dnnl_types.h); stable within version 3.
_SUCCESS = 0
_CPU_ENGINE = 1
_IN_ORDER_STREAM = 1
_F32 = 3
_TAG_ANY, _TAG_A = 1, 2
_FORWARD_INFERENCE = 96
_CONVOLUTION_DIRECT = 1
_QUERY_WEIGHTS_MD, _QUERY_SCRATCHPAD_MD = 131, 136
_SCRATCHPAD_USER = 1
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS, _ARG_SCRATCHPAD = 1, 17, 33, 41, 80
_ARG_FROM, _ARG_TO = 1, 17

_Dims = ctypes.c_int64 * 12
_P = ctypes.c_void_p


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _P)]


class OneDnnError(RuntimeError):
    pass


_state = {}  # "lib": the loaded _Library, or None after a failure or where none is found
_lock = threading.Lock()
_threads = [None]  # the OpenMP team size to use (None: OpenMP's default)
_made = [0]  # kernels made in this process (kernels_made())
# Convolutions of fewer multiply-adds run on one OpenMP thread whatever the step's team: a
# few microseconds of work, less than waking a second thread costs on a quiet machine, and
# on a loaded one the team waits at its barrier for the descheduled thread's next time
# slice (a ConvLSTM's 2x2x2x2 map, 3x3 filter, 288 multiply-adds: 12 us on one thread, 850
# us on two beside two busy processes; a NASNet 2x3x3x176 depthwise map, 28,512: 1.1-2x
# slower on two, quiet).
SERIAL_MACS = 32_768
_local = threading.local()


def wanted():
    """Whether oneDNN may be used: TFG_ONEDNN is not 0 and the library loads."""
    if os.environ.get(ENV_VAR, "1") == "0":
        return False
    return _library() is not None


def kernels_made():
    """How many convolution kernels this process has made: a step during which this grew
    paid for making them (milliseconds each), a one-time cost that timing a step for a
    choice must leave out (tfg/executor/blas_trial.py)."""
    return _made[0]


def set_threads(n):
    """Run oneDNN's convolutions on `n` threads from now on (None: OpenMP's default)."""
    _threads[0] = None if n is None else max(1, int(n))


def library_candidates():
    """Where the library is looked for, in order."""
    names = []
    if os.environ.get(LIBRARY_ENV_VAR):
        names.append(os.environ[LIBRARY_ENV_VAR])
    folders = [os.path.join(sys.prefix, "lib")]
    user_base = getattr(site, "USER_BASE", None)
    if user_base:
        folders.append(os.path.join(user_base, "lib"))
    names += [os.path.join(f, _SONAME) for f in folders]
    names.append(_SONAME)  # the dynamic loader's own search path
    return names


def _after_fork_in_child():
    """GNU OpenMP keeps no state across fork(): a child's first parallel region would wait
    forever for the parent's team. A forked child runs the numpy kernels instead."""
    if _state.get("lib") is not None:
        _state["lib"] = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _library():
    lib = _state.get("lib", False)
    if lib is not False:
        return lib
    with _lock:
        if "lib" not in _state:
            _state["lib"] = _load()
    return _state["lib"]


# How many times GNU OpenMP's idle threads spin before they sleep, where the user has not
# chosen (GOMP_SPINCOUNT, OMP_WAIT_POLICY). Its default, 300,000, doubles a two-thread step
# under load, where a thread spins at a barrier while the scheduler has put the other aside
# (two busy processes, `blas_threads=2`: MobileNetV3Small 36-92 -> 21 ms, ResNet50 254-276 ->
# 123-152); on a quiet machine the two were within noise (docs/performance.md).
GOMP_SPIN = "10000"


@contextlib.contextmanager
def _short_openmp_spin():
    """GOMP_SPINCOUNT set while the library, and with it libgomp, loads: libgomp reads its
    settings once, as it loads, and the processes tfg starts should not inherit ours."""
    if any(os.environ.get(k) for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")):
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = GOMP_SPIN
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


def _load():
    for path in library_candidates():
        if not os.path.isabs(path) or os.path.exists(path):
            try:
                with _short_openmp_spin():
                    return _Library(path)
            except OSError:
                continue  # not there, or its libgomp is missing: try the next
            except OneDnnError as e:
                off(str(e))
                return None
    return None


def off(reason):
    """Turn oneDNN off for this process, saying why on stderr once."""
    if _state.get("lib") is not None or "lib" not in _state:
        print(f"tfg: oneDNN is off for this run ({reason}); using the numpy kernels",
              file=sys.stderr)
    _state["lib"] = None


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


class _Library:
    """The loaded library, its CPU engine and stream, and OpenMP's thread setter."""

    def __init__(self, path):
        self.dll = dll = ctypes.CDLL(path)
        dll.dnnl_version.restype = ctypes.POINTER(_Version)
        version = dll.dnnl_version().contents
        if version.major != 3:
            raise OneDnnError(f"{path} is oneDNN {version.major}.{version.minor}; tfg "
                              f"uses version 3's API")
        dll.dnnl_primitive_desc_query_md.restype = _P
        dll.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        dll.dnnl_memory_set_data_handle.argtypes = [_P, _P]
        self.set_handle = dll.dnnl_memory_set_data_handle
        self.primitive_execute = dll.dnnl_primitive_execute
        self.engine, self.stream = _P(), _P()
        self.check(dll.dnnl_engine_create(ctypes.byref(self.engine), _CPU_ENGINE,
                                          ctypes.c_size_t(0)), "engine")
        self.check(dll.dnnl_stream_create(ctypes.byref(self.stream), self.engine,
                                          ctypes.c_uint(_IN_ORDER_STREAM)), "stream")
        # The OpenMP runtime the library was linked with (libgomp for onednn-cpu-gomp).
        omp = getattr(dll, "omp_set_num_threads", None)
        if omp is None:
            try:
                omp = ctypes.CDLL("libgomp.so.1").omp_set_num_threads
            except (OSError, AttributeError):
                omp = None
        self.omp_set_num_threads = omp

    def check(self, status, what):
        if status != _SUCCESS:
            raise OneDnnError(f"oneDNN {what} failed with status {status}")

    def memory_desc(self, dims, strides=None, tag=None, owner=None):
        md = _P()
        if strides is not None:
            status = self.dll.dnnl_memory_desc_create_with_strides(
                ctypes.byref(md), len(dims), _Dims(*dims), _F32, _Dims(*strides))
        else:
            status = self.dll.dnnl_memory_desc_create_with_tag(
                ctypes.byref(md), len(dims), _Dims(*dims), _F32, tag)
        self.check(status, "memory descriptor")
        _own(owner, "dnnl_memory_desc_destroy", md)
        return md

    def memory(self, md, address=0, owner=None):
        mem = _P()
        self.check(self.dll.dnnl_memory_create(ctypes.byref(mem), md, self.engine,
                                               _P(address)), "memory")
        _own(owner, "dnnl_memory_destroy", mem)
        return mem

    def primitive(self, pd, owner=None):
        """The primitive of descriptor `pd`, which is destroyed (the primitive keeps what
        it needs)."""
        prim = _P()
        try:
            self.check(self.dll.dnnl_primitive_create(ctypes.byref(prim), pd), "primitive")
        finally:
            self.dll.dnnl_primitive_desc_destroy(pd)
        _own(owner, "dnnl_primitive_destroy", prim)
        return prim

    def team(self, threads):
        """Set OpenMP's team size on the calling thread (OpenMP keeps it per thread)."""
        if threads is not None and self.omp_set_num_threads is not None \
                and getattr(_local, "threads", None) != threads:
            self.omp_set_num_threads(threads)
            _local.threads = threads

    def execute(self, prim, args, threads):
        if threads is not None and getattr(_local, "threads", None) != threads:
            self.team(threads)
        status = self.primitive_execute(prim, self.stream, len(args), args)
        if status != _SUCCESS:
            raise OneDnnError(f"oneDNN execute failed with status {status}")


def _own(owner, destroy, handle):
    """Note that `handle` is to be freed by the C function `destroy` with its owner."""
    if owner is not None and handle.value:
        owner.append((destroy, handle.value))


def _free(dll, owned):
    """Free what a Convolution created (its weakref finalizer: oneDNN's objects are C
    memory that Python's collector does not see)."""
    for destroy, value in reversed(owned):
        getattr(dll, destroy)(_P(value))
    owned.clear()


def _nhwc_strides(n, c, h, w, nchw):
    """Strides (in elements) of a dense 4-D activation in oneDNN's (N, C, H, W) order."""
    if nchw:
        return (c * h * w, h * w, w, 1)
    return (h * w * c, 1, w * c, c)


def _scratch(size):
    """The address of this thread's scratchpad of at least `size` bytes (oneDNN's own is
    shared by all threads unless it is built for concurrent execution, so tfg passes one per
    thread)."""
    kept = getattr(_local, "scratch", None)
    if kept is None or kept[0].nbytes < size:
        buf = np.empty(max(size, 4096) // 4 + 16, np.float32)
        kept = _local.scratch = (buf, buf.ctypes.data)
    return kept[1]


def _address(a):
    """The address of C-contiguous `a`'s data: through the buffer protocol where `a` is
    writable (0.5 us against numpy's .ctypes.data's 1.6; a call passes two or three). A
    read-only array (a Const's value) goes straight to .ctypes.data: the buffer protocol's
    refusal, raised and caught, cost 5-7 us a call in a model's step."""
    if a.flags.writeable:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(a))
        except (TypeError, ValueError, BufferError):
            pass
    return a.ctypes.data


class _Layout:
    """The filter in one of oneDNN's layouts: its buffer and memory object, the reorder from
    TensorFlow's layout into it, and which immutable filter it holds. The kernels of a
    Convolution that chose equal layouts share one (ResNet50's 100 MB of filters are kept
    once, not once per team size)."""

    def __init__(self, lib, conv, w_md, owned):
        dll = lib.dll
        self.w_md = w_md
        self.w_buf = np.empty(dll.dnnl_memory_desc_get_size(w_md) // 4 + 1, np.float32)
        self.m_w = lib.memory(w_md, self.w_buf.ctypes.data, owned)
        reorder_pd = _P()
        lib.check(dll.dnnl_reorder_primitive_desc_create(
            ctypes.byref(reorder_pd), conv.w_user, lib.engine, w_md, lib.engine, None),
            "filter reorder")
        self.reorder = lib.primitive(reorder_pd, owned)
        self.reorder_args = (_Arg * 2)(_Arg(_ARG_FROM, conv.m_w_user), _Arg(_ARG_TO, self.m_w))
        self.kept = None  # the immutable filter that w_buf holds


class _Kernel:
    """One primitive of a Convolution for one OpenMP team size, the _Layout of the filter it
    reads, and its argument list (memory objects set to each call's arrays). `owned` lists
    what to free with the Convolution."""

    def __init__(self, lib, pd, conv, owned):
        """`pd`: the primitive's descriptor, which this consumes (destroys)."""
        dll = lib.dll
        query = dll.dnnl_primitive_desc_query_md
        try:
            w_md = _P()  # a copy: the descriptor's own goes with it
            lib.check(dll.dnnl_memory_desc_clone(
                ctypes.byref(w_md), _P(query(pd, _QUERY_WEIGHTS_MD, 0))), "clone")
            _own(owned, "dnnl_memory_desc_destroy", w_md)
            scratch_md = _P(query(pd, _QUERY_SCRATCHPAD_MD, 0))
            self.scratch_size = dll.dnnl_memory_desc_get_size(scratch_md)
            # Passed even when empty: with a user scratchpad the kernels look it up.
            self.m_scratch = lib.memory(scratch_md, owner=owned)
        except OneDnnError:
            dll.dnnl_primitive_desc_destroy(pd)
            raise
        self.prim = lib.primitive(pd, owned)  # destroys pd, made or not
        self.scratch_at = None  # the address m_scratch was last given
        for layout in conv.layouts:
            if dll.dnnl_memory_desc_equal(layout.w_md, w_md):
                break
        else:
            layout = _Layout(lib, conv, w_md, owned)
            conv.layouts.append(layout)
        self.layout = layout
        args = [_Arg(_ARG_SRC, conv.m_src), _Arg(_ARG_WEIGHTS, layout.m_w),
                _Arg(_ARG_DST, conv.m_dst), _Arg(_ARG_SCRATCHPAD, self.m_scratch)]
        if conv.m_bias is not None:
            args.append(_Arg(_ARG_BIAS, conv.m_bias))
        self.args = (_Arg * len(args))(*args)


class Convolution:
    """One oneDNN forward convolution for fixed shapes: `conv(x, w, b=None) -> y` (float32,
    C-contiguous x in TensorFlow's NHWC or NCHW, filter HWIO, or [KH, KW, C, M] for a
    depthwise one), with the bias added in oneDNN's output loop where asked. The filter is
    reordered into oneDNN's layout once per immutable filter (a graph constant's value), and
    at every call for any other (a fed value or a variable, which may change between calls).

    oneDNN's kernels fix their thread count when they are created, so there is one _Kernel
    per team size the Session's meter has asked for (one or two on a 2-core machine); those
    that chose the same filter layout share one _Layout."""

    def __init__(self, lib, x_shape, w_shape, g, nchw, bias, depthwise=False):
        self.lib = lib
        dll = lib.dll
        kh, kw, ci, oc = w_shape
        if depthwise:  # a [KH, KW, C, M] filter: C groups of M outputs, channel c*M + m
            oc = ci * oc
        if nchw:
            n, c, h, w = x_shape
            self.out_shape = (n, oc, g.oh, g.ow)
        else:
            n, h, w, c = x_shape
            self.out_shape = (n, g.oh, g.ow, oc)
        self.x_shape, self.w_shape, self.g, self.nchw = tuple(x_shape), tuple(w_shape), g, nchw
        self.depthwise = depthwise
        taps = kh * kw * (1 if depthwise else ci)
        self.serial = int(np.prod(self.out_shape)) * taps < SERIAL_MACS  # see SERIAL_MACS
        self._owned = owned = []  # oneDNN objects this convolution frees (_free)
        weakref.finalize(self, _free, dll, owned).atexit = False
        self.src = lib.memory_desc((n, c, h, w), _nhwc_strides(n, c, h, w, nchw), owner=owned)
        self.dst = lib.memory_desc((n, oc, g.oh, g.ow), _nhwc_strides(n, oc, g.oh, g.ow, nchw),
                                   owner=owned)
        # TensorFlow's HWIO filter, described in oneDNN's (O, I, H, W) order, or its
        # (G, O/G, I/G, H, W) order for a depthwise one (I/G = 1).
        if depthwise:
            m = w_shape[3]
            dims = (ci, m, 1, kh, kw)
            self.w_user = lib.memory_desc(dims, (m, 1, 1, kw * ci * m, ci * m), owner=owned)
        else:
            dims = (oc, ci, kh, kw)
            self.w_user = lib.memory_desc(dims, (1, oc, kw * ci * oc, ci * oc), owner=owned)
        self.w_any = lib.memory_desc(dims, tag=_TAG_ANY, owner=owned)
        self.b_md = lib.memory_desc((oc,), tag=_TAG_A, owner=owned) if bias else None
        self.attr = attr = _P()
        lib.check(dll.dnnl_primitive_attr_create(ctypes.byref(attr)), "attributes")
        _own(owned, "dnnl_primitive_attr_destroy", attr)
        lib.check(dll.dnnl_primitive_attr_set_scratchpad_mode(attr, _SCRATCHPAD_USER),
                  "scratchpad mode")
        self.m_src = lib.memory(self.src, owner=owned)
        self.m_dst = lib.memory(self.dst, owner=owned)
        self.m_w_user = lib.memory(self.w_user, owner=owned)
        self.m_bias = lib.memory(self.b_md, owner=owned) if bias else None
        self.kernels = {}  # team size -> _Kernel
        # The address each of m_src, m_dst and m_bias was last given (a handle is set only
        # when it changes: each dnnl_memory_set_data_handle cost 1-2 us in a model's step,
        # where the interpreter runs out of cache after each convolution), and the bias
        # array whose address m_bias holds (kept alive here, so the address stays its own).
        self._at = [None, None, None]
        self._bias = None
        self.layouts = []  # the _Layouts its kernels read the filter in
        self.call_lock = threading.Lock()  # the memory objects are this convolution's own
        self._kernel(self.team())  # fails here, not at a call, where oneDNN has no kernel
        if self.team() != 1 and (os.cpu_count() or 1) > 1:
            # The one-thread kernel too: the adaptive setting's trial times steps on one
            # thread (tfg/executor/blas_trial.py), and a step that makes kernels is not
            # timed; made here, in the step that makes the others, it costs no trial step.
            self._kernel(1)

    def team(self):
        """The OpenMP team size for a call now: the step's (set_threads), one for a
        convolution under SERIAL_MACS."""
        return 1 if self.serial else _threads[0]

    def _kernel(self, threads):
        kernel = self.kernels.get(threads)
        if kernel is None:
            lib, g = self.lib, self.g
            lib.team(threads)  # read by the primitive's creation
            pd = _P()
            lib.check(lib.dll.dnnl_convolution_forward_primitive_desc_create(
                ctypes.byref(pd), lib.engine, _FORWARD_INFERENCE, _CONVOLUTION_DIRECT,
                self.src, self.w_any, self.b_md, self.dst, _Dims(g.sh, g.sw),
                _Dims(g.dh - 1, g.dw - 1), _Dims(g.pt, g.pl), _Dims(g.pb, g.pr), self.attr),
                "convolution")
            kernel = self.kernels[threads] = _Kernel(lib, pd, self, self._owned)
            _made[0] += 1
        return kernel

    def _filter(self, kernel, w, threads):
        """Put `w` into the kernel's layout, unless it is the immutable filter (a Const's
        value) that the kernel holds already."""
        layout = kernel.layout
        if layout.kept is w and immutable(w):
            return
        w = np.ascontiguousarray(w, np.float32)
        self.lib.set_handle(self.m_w_user, w.ctypes.data)
        self.lib.execute(layout.reorder, layout.reorder_args, threads)
        layout.kept = w if immutable(w) else None

    def __call__(self, x, w, b=None):
        if _state.get("lib") is None:
            raise OneDnnError("oneDNN is off in this process")  # after fork(), say
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = np.empty(self.out_shape, np.float32)
        threads = self.team()
        with self.call_lock:
            kernel = self.kernels.get(threads) or self._kernel(threads)
            self._filter(kernel, w, threads)
            if b is not None and b is not self._bias:
                # oneDNN reads the bias at each execution: the same array, whatever its
                # values now, needs no new handle (a converted copy is not kept).
                kept = np.ascontiguousarray(b, np.float32)
                self._set_bias(_address(kept))
                self._bias = b if kept is b else None
            self._execute(kernel, x, y, threads)
        return y

    def _set_bias(self, address):
        if address != self._at[2]:
            self.lib.set_handle(self.m_bias, address)
            self._at[2] = address

    def _execute(self, kernel, x, y, threads):
        """Run `kernel` from `x` into `y` (under call_lock)."""
        self.execute_at(kernel, _address(x), _address(y), threads)

    def execute_at(self, kernel, src, dst, threads):
        """Point the source, destination and scratchpad at the addresses `src`, `dst` and
        this thread's scratchpad where they point elsewhere, and run `kernel` (under
        call_lock; OneDnnError where it fails)."""
        at, set_handle = self._at, self.lib.set_handle
        if src != at[0]:
            set_handle(self.m_src, src)
            at[0] = src
        if dst != at[1]:
            set_handle(self.m_dst, dst)
            at[1] = dst
        address = _scratch(kernel.scratch_size)
        if address != kernel.scratch_at:
            set_handle(kernel.m_scratch, address)
            kernel.scratch_at = address
        self.lib.execute(kernel.prim, kernel.args, threads)

    def bound(self, w, b=None):
        """`run(x) -> y`: this convolution with the filter `w` and bias `b` fixed, for
        C-contiguous float32 `x` of its input shape (the caller checks), or None where `w`
        or `b` may change (a fed or variable filter: __call__ then reorders it as needed).
        `run` returns None where oneDNN is off or fails (off() says why): the caller's
        general path then takes its numpy fallback.

        Why: a convolution node of a model's step paid 20-35 us of Python around its
        oneDNN call, in five frames (the kernel, the fused steps, Prepared, __call__,
        the filter check); NASNetMobile runs 356 of them a step. With `w` and `b` graph
        constants (immutable: nothing writes them) the filter's layout and the bias handle
        are checked by identity."""
        if not immutable(w):
            return None
        if b is not None:
            channels = self.out_shape[1:2] if self.nchw else self.out_shape[-1:]
            if not (self.m_bias is not None and type(b) is np.ndarray and immutable(b)
                    and b.dtype == np.float32 and b.flags.c_contiguous
                    and b.shape == channels):
                return None
            b_address = b.ctypes.data
        else:
            b_address = None
        kernels, lock, out_shape, at = self.kernels, self.call_lock, self.out_shape, self._at
        lib = self.lib
        set_handle, primitive_execute, stream = lib.set_handle, lib.primitive_execute, lib.stream
        m_src, m_dst = self.m_src, self.m_dst
        empty, f32 = np.empty, np.float32
        serial = self.serial

        def run(x):
            # The steps of _execute and _Library.execute written out: each frame here was
            # ~1 us of a NASNetMobile convolution's 10 us of Python (2.7% of its step).
            if _state.get("lib") is None:
                return None
            threads = 1 if serial else _threads[0]
            status = None
            with lock:  # (what another thread's call may change is tested under it)
                kernel = kernels.get(threads)
                if (kernel is not None and kernel.layout.kept is w
                        and (b is None or b is self._bias)):
                    y = empty(out_shape, f32)
                    address = _address(x)
                    if address != at[0]:
                        set_handle(m_src, address)
                        at[0] = address
                    address = _address(y)
                    if address != at[1]:
                        set_handle(m_dst, address)
                        at[1] = address
                    address = _scratch(kernel.scratch_size)
                    if address != kernel.scratch_at:
                        set_handle(kernel.m_scratch, address)
                        kernel.scratch_at = address
                    if threads is not None and getattr(_local, "threads", None) != threads:
                        lib.team(threads)
                    status = primitive_execute(kernel.prim, stream, len(kernel.args),
                                               kernel.args)
            if status is None:  # a new team size, or the filter or bias to set first
                return self._first_run(x, w, b, b_address)
            if status != _SUCCESS:
                off(f"oneDNN execute failed with status {status}")
                return None
            return y
        return run

    def _first_run(self, x, w, b, b_address):
        """A bound run that makes the kernel for this team size, puts the filter into its
        layout or the bias handle on `b` first (or finds oneDNN off: None)."""
        if _state.get("lib") is None:
            return None
        y = np.empty(self.out_shape, np.float32)
        threads = self.team()
        try:
            with self.call_lock:
                kernel = self.kernels.get(threads) or self._kernel(threads)
                if kernel.layout.kept is not w:
                    self._filter(kernel, w, threads)
                if b is not None and b is not self._bias:
                    self._set_bias(b_address)
                    self._bias = b
                self._execute(kernel, x, y, threads)
        except OneDnnError as e:
            off(str(e))
            return None
        return y


def convolution(x_shape, w_shape, g, nchw=False, bias=False, depthwise=False):
    """A Convolution for float32 inputs of these shapes and geometry `g` (conv_geom.Geom),
    Conv2D's or (`depthwise`) DepthwiseConv2dNative's, or None where oneDNN is absent or
    off, a shape is empty, or it has no kernel for this geometry."""
    if 0 in tuple(x_shape) + tuple(w_shape) or not wanted():
        return None
    try:
        return Convolution(_library(), x_shape, w_shape, g, nchw, bias, depthwise)
    except OneDnnError:
        return None  # no kernel for this geometry (status 3, unimplemented): numpy runs it


class Prepared:
    """`run(x, w, *rest)`: the oneDNN convolution `conv(x, w)` (`conv(x, w, rest[0])`, the
    bias, for one that adds a bias), or `fallback(x, w, *rest)` (tfg's numpy path, same
    arguments) once a oneDNN call has failed."""

    __slots__ = ("conv", "fallback")

    def __init__(self, conv, fallback):
        self.conv, self.fallback = conv, fallback

    def __call__(self, x, w, *rest):
        conv = self.conv
        if conv is not None and _state.get("lib") is not None:
            try:
                return conv(x, w) if conv.m_bias is None else conv(x, w, rest[0])
            except OneDnnError as e:
                off(str(e))
        self.conv = None
        return self.fallback(x, w, *rest)


def prepared(x_shape, w_shape, g, nchw, dtype, fallback):
    """A Prepared oneDNN convolution for a float32 Conv2D of these shapes, or `fallback`
    itself where oneDNN does not run it."""
    if np.dtype(dtype) != np.float32:
        return fallback
    conv = convolution(x_shape, w_shape, g, nchw)
    return fallback if conv is None else Prepared(conv, fallback)
