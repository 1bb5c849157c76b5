#!/usr/bin/env python3
"""Small hostile inputs for tfg (issue 21): each is a few bytes to a few MB that once crashed,
hung or exhausted memory. tests/test_hostile*.py make them in a temporary folder at test time.

    python3 tools/gen_hostile.py OUT_DIR            # every case
    python3 tools/gen_hostile.py OUT_DIR deep_pbtxt splat_fold

Each generator writes its files into OUT_DIR and returns the main path. No TensorFlow needed:
the files are built from tfg's own protobuf messages, as an attacker would build them.
"""
import os
import pathlib
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tfg.schemas.proto import graph_pb2  # noqa: E402

GENERATORS = {}


def generator(fn):
    GENERATORS[fn.__name__] = fn
    return fn


def _write(out, name, data):
    path = os.path.join(out, name)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def _node(gd, name, op, inputs=(), **attrs):
    nd = gd.node.add(name=name, op=op)
    nd.input.extend(inputs)
    for key, set_value in attrs.items():
        set_value(nd.attr[key])
    return nd


def _dtype(code):
    def set_value(av):
        av.type = code
    return set_value


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_STRING, DT_INT64 = 1, 2, 3, 7, 9


def _splat(code, shape, field, value):
    def set_value(av):
        t = av.tensor
        t.dtype = code
        for d in shape:
            t.tensor_shape.dim.add().size = d
        getattr(t, field).append(value)
    return set_value


# --- 1. text format nesting -------------------------------------------------------------------
def nested_text(levels):
    """A text GraphDef whose attr nests `levels` function values (3 messages a level)."""
    inner = "i: 1"
    for _ in range(levels):
        inner = 'func { name: "f" attr { key: "a" value { %s } } }' % inner
    return 'node { name: "x" op: "NoOp" attr { key: "a" value { %s } } }\n' % inner


@generator
def deep_pbtxt(out):
    """~600 message levels of text: Python's text parser recursed until RecursionError."""
    return _write(out, "deep.pbtxt", nested_text(200))


@generator
def deep_convert(out):
    """40 levels (~120 messages): parses as text, but its binary form exceeds protobuf's
    100-level limit, so `tfg convert` wrote a .pb no reader accepts."""
    return _write(out, "deep40.pbtxt", nested_text(40))


@generator
def deep_feed(out):
    """A --feed literal nested 3,000 deep (json and ast recurse per level)."""
    _placeholder(out)
    return _write(out, "deep_feed.txt", "x=" + "[" * 3000 + "]" * 3000)


def _placeholder(out):
    gd = graph_pb2.GraphDef()
    _node(gd, "x", "Placeholder", dtype=_dtype(DT_FLOAT))
    return _write(out, "placeholder.pb", gd.SerializeToString())


# --- 2. constant folding of splats ------------------------------------------------------------
@generator
def splat_fold(out):
    """16 Consts of 2**27 elements stored as one value each (doubles and strings), each read
    by a foldable op: a 1-2 KB file that folding would expand to 16+ GB."""
    gd = graph_pb2.GraphDef()
    for i in range(16):
        if i % 2:
            _node(gd, f"c{i}", "Const", dtype=_dtype(DT_STRING),
                  value=_splat(DT_STRING, [1 << 27], "string_val", b"x"))
            _node(gd, f"y{i}", "Identity", [f"c{i}"], T=_dtype(DT_STRING))
        else:
            _node(gd, f"c{i}", "Const", dtype=_dtype(DT_DOUBLE),
                  value=_splat(DT_DOUBLE, [1 << 27], "double_val", 1.5))
            _node(gd, f"y{i}", "Neg", [f"c{i}"], T=_dtype(DT_DOUBLE))
    return _write(out, "splat_fold.pb", gd.SerializeToString())


# --- 3. function inlining ---------------------------------------------------------------------
@generator
def inline_bomb(out, levels=16, leaf_bytes=1 << 20):
    """f0 calls f1 twice, f1 calls f2 twice, ...; the leaf holds a 1 MB string attr: 2**16
    copies of it once inlined (64 GB), from a 1 MB file under the node cap."""
    gd = graph_pb2.GraphDef()
    lib = gd.library
    for level in range(levels + 1):
        f = lib.function.add()
        f.signature.name = f"f{level}"
        if level == levels:
            nd = f.node_def.add(name="leaf", op="NoOp")
            nd.attr["payload"].s = b"p" * leaf_bytes
            continue
        for k in range(2):
            f.node_def.add(name=f"call{k}", op=f"f{level + 1}")
    _node(gd, "root", "f0")
    return _write(out, "inline_bomb.pb", gd.SerializeToString())


# --- 4. SavedModel bundles -------------------------------------------------------------------
MLP = ROOT / "tests" / "fixtures" / "savedmodel" / "mlp"


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _table(entries):
    """An uncompressed LevelDB table (what a bundle's .index is) of sorted (key, value)."""
    from tfg.schemas.crc32c import masked_crc32c

    def block(items):
        body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v
                        for k, v in items)
        body += struct.pack("<II", 0, 1)  # one restart point at 0
        return body + b"\0" + struct.pack("<I", masked_crc32c(body + b"\0"))

    data = block(sorted(entries))
    index_body = block([(b"\xff", _varint(0) + _varint(len(data) - 5))])
    footer = _varint(0) + _varint(0) + _varint(len(data)) + _varint(len(index_body) - 5)
    footer += b"\0" * (40 - len(footer)) + struct.pack("<Q", 0xDB4775248B80FB57)
    return data + index_body + footer


def _bundle(folder, tensors):
    """variables/variables.{index,data-00000-of-00001} holding `tensors`:
    {name: (dtype code, shape, offset, size, crc)} over the given data bytes."""
    from tfg.schemas.proto import saved_model_pb2
    entries, data = [], tensors.pop(b"")
    header = saved_model_pb2.BundleHeaderProto(num_shards=1)
    entries.append((b"", header.SerializeToString()))
    for name, (dtype, shape, offset, size, crc) in tensors.items():
        e = saved_model_pb2.BundleEntryProto(dtype=dtype, offset=offset, size=size, crc32c=crc)
        for d in shape:
            e.shape.dim.add().size = d
        entries.append((name.encode(), e.SerializeToString()))
    var = os.path.join(folder, "variables")
    os.makedirs(var, exist_ok=True)
    _write(var, "variables.index", _table(entries))
    _write(var, "variables.data-00000-of-00001", data)


def _mlp_copy(out, name):
    import shutil
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    shutil.copy(MLP / "saved_model.pb", folder)
    return folder


@generator
def bundle_one_block(out, entries=20000, block=1 << 20):
    """20,000 index entries over one 1 MB block: each was CRC-checked (pure Python) and copied
    on its own, minutes of CPU and gigabytes from a 1 MB shard."""
    from tfg.schemas.crc32c import masked_crc32c
    folder = _mlp_copy(out, "one_block")
    data = b"\1" * block
    crc = masked_crc32c(data)
    tensors = {f"v{i:06d}": (1, [block // 4], 0, block, crc) for i in range(entries)}
    tensors[b""] = data
    _bundle(folder, tensors)
    return folder


@generator
def bundle_wrong_dtype(out):
    """The mlp model with w1 (float32 [4,8], 128 bytes) stored as int64 [16]: same bytes, so
    only a check against the graph catches it (it printed garbage with exit 0)."""
    from tfg.graphdef.savedmodel import read_variables
    from tfg.schemas.crc32c import masked_crc32c
    folder = _mlp_copy(out, "wrong_dtype")
    tensors, data = {}, b""
    for name, value in sorted(read_variables(str(MLP)).items()):
        raw = value.tobytes()
        dtype, shape = (9, [16]) if name == "w1" else (1, list(value.shape))
        tensors[name] = (dtype, shape, len(data), len(raw), masked_crc32c(raw))
        data += raw
    tensors[b""] = data
    _bundle(folder, tensors)
    return folder


@generator
def bundle_symlink(out, target="/etc/passwd"):
    """The mlp model whose variables shard is a symlink to a file outside the folder."""
    import shutil
    folder = _mlp_copy(out, "symlink")
    os.makedirs(os.path.join(folder, "variables"), exist_ok=True)
    shutil.copy(MLP / "variables" / "variables.index", os.path.join(folder, "variables"))
    os.symlink(target, os.path.join(folder, "variables", "variables.data-00000-of-00001"))
    return folder


# --- 5. checkpoints ---------------------------------------------------------------------------
def variable_graph(out, name="counter.pbtxt", var="w", size=2):
    """A graph with one float variable `var` of shape [size]: `init` sets it to zeros, `train`
    adds ones (a step counter per element), `read` reads it."""
    text = f"""
node {{ name: "{var}" op: "VariableV2" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
  attr {{ key: "shape" value {{ shape {{ dim {{ size: {size} }} }} }} }} }}
node {{ name: "zeros" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
  attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ dim {{ size: {size} }} }}
  float_val: 0 }} }} }} }}
node {{ name: "ones" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
  attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ dim {{ size: {size} }} }}
  float_val: 1 }} }} }} }}
node {{ name: "init" op: "Assign" input: "{var}" input: "zeros"
  attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
node {{ name: "train" op: "AssignAdd" input: "{var}" input: "ones"
  attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
node {{ name: "read" op: "Identity" input: "{var}" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
"""
    return _write(out, name, text)


def _checkpoint(path, tensors, step):
    """A tfg checkpoint file with a valid header and checksum around `tensors` (TensorProto
    setters) and `step`, as a forger would write it."""
    import zlib
    from tfg.schemas.proto import checkpoint_pb2
    msg = checkpoint_pb2.Checkpoint(producer="forged", step=step, has_step=True)
    for name, set_tensor in tensors.items():
        set_tensor(msg.tensors.add(name=name).tensor)
    payload = msg.SerializeToString()
    data = struct.pack("<8sIQI", b"TFGCKPT\0", 1, len(payload), zlib.crc32(payload)) + payload
    with open(path, "wb") as f:
        f.write(data)
    return path


@generator
def ckpt_splats(out):
    """A 200-byte checkpoint of 8 tensors each declaring 1 GiB from one value."""
    variable_graph(out)

    def splat(t):
        t.dtype = DT_FLOAT
        t.tensor_shape.dim.add().size = 1 << 28
        t.float_val.append(1.0)
    folder = os.path.join(out, "ckpt_splats")
    os.makedirs(folder, exist_ok=True)
    return _checkpoint(os.path.join(folder, "variables.tfgckpt"),
                       {f"v{i}": splat for i in range(8)}, step=1)


@generator
def ckpt_negative_step(out):
    """A checkpoint of the counter graph at step -1000: resuming would run extra steps."""
    variable_graph(out)

    def w(t):
        t.dtype = DT_FLOAT
        t.tensor_shape.dim.add().size = 2
        t.tensor_content = struct.pack("<2f", 0, 0)
    folder = os.path.join(out, "ckpt_negative")
    os.makedirs(folder, exist_ok=True)
    return _checkpoint(os.path.join(folder, "variables.tfgckpt"), {"w": w}, step=-1000)


# --- 6. kernels that allocate from what they are given ------------------------------------------
def _const_text(name, dtype, values, shape=None):
    shape = [len(values)] if shape is None else shape
    dims = " ".join(f"dim {{ size: {d} }}" for d in shape)
    field = {"DT_INT32": "int_val", "DT_FLOAT": "float_val", "DT_INT64": "int64_val"}[dtype]
    vals = " ".join(f"{field}: {v}" for v in values)
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }} '
            f'attr {{ key: "value" value {{ tensor {{ dtype: {dtype} tensor_shape {{ {dims} }} '
            f'{vals} }} }} }} }}\n')


def _op_text(name, op, inputs, **attrs):
    ins = " ".join(f'input: "{i}"' for i in inputs)
    body = " ".join(f'attr {{ key: "{k}" value {{ {v} }} }}' for k, v in attrs.items())
    return f'node {{ name: "{name}" op: "{op}" {ins} {body} }}\n'


_F = "type: DT_FLOAT"
_I = "type: DT_INT32"


def _ints(*values):
    return "list { " + " ".join(f"i: {v}" for v in values) + " }"


ALLOCATORS = {
    # shape input [2**34] floats: 64 GiB
    "StridedSliceGrad": (_const_text("shape", "DT_INT32", [1 << 30, 16])
                         + _const_text("b", "DT_INT32", [0, 0]) + _const_text("e", "DT_INT32", [1, 1])
                         + _const_text("s", "DT_INT32", [1, 1])
                         + _const_text("dy", "DT_FLOAT", [1], [1, 1])
                         + _op_text("y", "StridedSliceGrad", ["shape", "b", "e", "s", "dy"],
                                    T=_F, Index=_I)),
    # input_sizes [1024, 1024, 1024, 16] floats: 64 GiB (the gradient is checked only after)
    "Conv2DBackpropInput": (_const_text("sizes", "DT_INT32", [1024, 1024, 1024, 16])
                            + _const_text("f", "DT_FLOAT", [1], [1, 1, 16, 1])
                            + _const_text("g", "DT_FLOAT", [1], [1, 1, 1, 1])
                            + _op_text("y", "Conv2DBackpropInput", ["sizes", "f", "g"], T=_F,
                                       strides=_ints(1, 1, 1, 1), padding='s: "VALID"')),
    "AvgPoolGrad": (_const_text("shape", "DT_INT32", [1024, 1024, 1024, 16])
                    + _const_text("g", "DT_FLOAT", [1], [1, 1, 1, 16])
                    + _op_text("y", "AvgPoolGrad", ["shape", "g"], T=_F,
                               ksize=_ints(1, 1, 1, 1), strides=_ints(1, 1, 1, 1),
                               padding='s: "VALID"')),
    # an unset item of an empty list, element_shape [2**17, 2**17] floats: 64 GiB of zeros
    "TensorListGetItem": (_const_text("es", "DT_INT32", [1 << 17, 1 << 17])
                          + _const_text("n", "DT_INT32", [4], [])
                          + _const_text("i", "DT_INT32", [0], [])
                          + _op_text("l", "TensorListReserve", ["es", "n"],
                                     element_dtype=_F, shape_type=_I)
                          + _op_text("y", "TensorListGetItem", ["l", "i", "es"],
                                     element_dtype=_F)),
    # one index of 2**31-1 and rows of 64 floats: 512 GiB
    "DynamicStitch": (_const_text("idx", "DT_INT32", [2147483647])
                      + _const_text("d", "DT_FLOAT", [1], [1, 64])
                      + _op_text("y", "DynamicStitch", ["idx", "d"], N="i: 1", T=_F)),
    # 4096 references to one 16 MB tensor: 64 GiB
    "Pack": (_const_text("dims", "DT_INT32", [1 << 22]) + _const_text("one", "DT_FLOAT", [1], [])
             + _op_text("x", "Fill", ["dims", "one"], T=_F)
             + _op_text("y", "Pack", ["x"] * 4096, N="i: 4096", T=_F)),
    "ConcatV2": (_const_text("dims", "DT_INT32", [1 << 22])
                 + _const_text("one", "DT_FLOAT", [1], [])
                 + _const_text("axis", "DT_INT32", [0], [])
                 + _op_text("x", "Fill", ["dims", "one"], T=_F)
                 + _op_text("y", "ConcatV2", ["x"] * 4096 + ["axis"], N="i: 4096", T=_F)),
    # reductions of an empty [0, 2**34] input (nothing allocated) to [2**34] floats: 64 GiB
    "Sum": (_const_text("dims", "DT_INT32", [0, 1 << 34 >> 4, 16])
            + _const_text("one", "DT_FLOAT", [1], [])
            + _const_text("axis", "DT_INT32", [0], [])
            + _op_text("x", "Fill", ["dims", "one"], T=_F)
            + _op_text("y", "Sum", ["x", "axis"], T=_F, Tidx=_I)),
    "BiasAddGrad": (_const_text("dims", "DT_INT32", [0, 1 << 30, 16])
                    + _const_text("one", "DT_FLOAT", [1], [])
                    + _op_text("x", "Fill", ["dims", "one"], T=_F)
                    + _op_text("y", "BiasAddGrad", ["x"], T=_F,
                               data_format='s: "NCHW"')),
}


@generator
def allocators(out):
    """One graph per kernel that once allocated 64-512 GiB past --max-memory: `y` asks."""
    folder = os.path.join(out, "allocators")
    os.makedirs(folder, exist_ok=True)
    for op, text in ALLOCATORS.items():
        _write(folder, f"{op}.pbtxt", text)
    return folder


# --- 7. a vector's length taken as a rank (tools/fuzz.py --real) -------------------------------
RANK_SPLATS = {"Transpose": "Tperm", "Tile": "Tmultiples", "Pad": "Tpaddings"}


@generator
def rank_splats(out, entries=1 << 27):
    """One graph per op whose shape function took the result's rank from the length of its
    perm/multiples/paddings input when the data's rank is unknown: here a one-value Const of
    2**27 entries (a 1 GiB tuple of Nones per inference; 2**31, as the fuzzer made, 16 GiB);
    their kernels, given data of rank 2, wrote all the entries into the error message."""
    folder = os.path.join(out, "rank_splats")
    os.makedirs(folder, exist_ok=True)
    for op, attr in RANK_SPLATS.items():
        shape = [entries // 2, 2] if op == "Pad" else [entries]
        gd = graph_pb2.GraphDef()
        _node(gd, "x", "Placeholder", dtype=_dtype(DT_FLOAT))
        _node(gd, "v", "Const", dtype=_dtype(DT_INT32),
              value=_splat(DT_INT32, shape, "int_val", 1))
        _node(gd, "y", op, ["x", "v"], T=_dtype(DT_FLOAT), **{attr: _dtype(DT_INT32)})
        _write(folder, f"{op}.pb", gd.SerializeToString())
    return folder


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    out, names = argv[0], argv[1:] or sorted(GENERATORS)
    os.makedirs(out, exist_ok=True)
    for name in names:
        print(GENERATORS[name](out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
