"""TensorFlow's SavedModel (v1 graphs) and MetaGraphDef files as tfg inputs.

    >>> g = load_graph("export/1")                     # a folder with saved_model.pb
    >>> g.saved_model.tags, sorted(g.saved_model.signatures)
    (['serve'], ['logits', 'serving_default'])
    >>> g.saved_model.signatures["serving_default"]["inputs"]
    {'x': {'name': 'x:0', 'dtype': 'float32', 'shape': [None, 4]}}
    >>> read_variables("export/1")                     # the trained values in variables/
    {'w1': array([[...]], dtype=float32), ...}

A SavedModel holds one MetaGraphDef per tag set; `tags` picks one (default: the only one, else
the one tagged exactly "serve"). Its GraphDef is what every tfg command works on; signatures map
friendly input/output keys to tensor names (`tfg run DIR --signature serving_default --feed
x=...`). The variables/ folder is a tensor bundle: an SSTable index (LevelDB's layout, no
compression) of BundleEntryProto and raw little-endian data shards; `read_variables` decodes it
and checks every CRC.

TF2 SavedModels (tf.saved_model.save) keep the computation in the graph's function library and
the variables as resource variables: `load_graph` inlines every function call
(tfg.graphdef.functions) and `tfg.executor.restore.restore_variables` runs the saver's
restore function (tfg.graphdef.savedmodel_tf2), so `tfg run DIR --signature serving_default`
works for both.
Control flow v2 (If, Case, While) is lowered to v1 Switch/Merge/Enter/Exit. A call that cannot
be inlined (an op tfg does not know, a missing or recursive function) stays a call node;
running anything that needs it is refused with the reason.
"""
import os
import shlex
import struct
from dataclasses import dataclass, field

import numpy as np
from google.protobuf import message as pb_message
from google.protobuf import text_format

from tfg.errors import GraphFormatError, TfgInputError
from tfg.graphdef.decode import loads
from tfg.graphdef.functions import inline_functions, is_functional, library_functions
from tfg.graphdef.names import parse_input
from tfg.graphdef.nesting import check_text_depth
from tfg.graphdef.object_graph import saved_objects
from tfg.graphdef.savedmodel_tf2 import check_inlined, saver_def, unmodelled_fields
from tfg.graphdef.state_checks import check_disjoint, check_entry_size, check_inside
from tfg.schemas import tensors
from tfg.schemas.crc32c import crc32c, mask, masked_crc32c
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import saved_model_pb2
from tfg.schemas.wire import read_varint

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48


@dataclass
class SavedModelInfo:
    """What a SavedModel adds to its graph; tfg attaches it as `graph.saved_model`."""

    path: str  # the SavedModel folder
    tags: list
    signatures: dict = field(default_factory=dict)  # name -> {method, inputs, outputs}
    available_tags: list = field(default_factory=list)  # every MetaGraphDef's tag set
    saver: dict = field(default_factory=dict)  # SaverDef strings (restore_op_name, ...)
    functions: dict = None  # TF2: {"inlined": n, "not_inlined": {call node: why}}
    objects: object = None  # TF2: its SavedObjectGraph (tfg.graphdef.object_graph)
    assets: dict = field(default_factory=dict)  # tensor name -> the file under assets/
    init_ops: list = field(default_factory=list)  # what the loader runs after restoring

    @property
    def variables_prefix(self):
        prefix = os.path.join(self.path, "variables", "variables")
        return prefix if os.path.exists(prefix + ".index") else None


def is_saved_model(path):
    """Whether `path` is a SavedModel folder, its saved_model.pb(txt), or a `.meta` file."""
    if path in (None, "-"):
        return False
    path = os.fspath(path)
    if os.path.isdir(path):
        return any(os.path.isfile(os.path.join(path, f)) for f in SAVED_MODEL_FILES)
    return os.path.basename(path) in SAVED_MODEL_FILES or path.endswith(".meta")


def _model_file(path):
    if os.path.isdir(path):
        for name in SAVED_MODEL_FILES:
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
        raise TfgInputError(f"{path} is a directory without saved_model.pb")
    return path


def _parse(data, msg, source):
    try:
        if data[:1].isalpha() or data.lstrip()[:1] == b"#":
            check_text_depth(data, source)
            text_format.Parse(data.decode("utf-8"), msg)
        else:
            msg.ParseFromString(data)
    except (text_format.ParseError, pb_message.DecodeError, UnicodeDecodeError, RuntimeError,
            ValueError) as e:
        raise GraphFormatError(f"{source}: not a {type(msg).__name__}: "
                               f"{' '.join(str(e).split())[:200]}") from None
    return msg


def read_saved_model(path):
    """The SavedModel message of a folder or saved_model.pb(txt); a `.meta` file (one
    MetaGraphDef, as tf.train.Saver writes) comes back wrapped in a SavedModel."""
    path = os.fspath(path)
    model_file = _model_file(path)
    if os.path.isdir(path):
        check_inside(path, model_file, "model file")
    try:
        with open(model_file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TfgInputError(f"cannot read {model_file}: {e.strerror}") from None
    if model_file.endswith(".meta"):
        sm = saved_model_pb2.SavedModel()
        _parse(data, sm.meta_graphs.add(), model_file)
        return sm
    sm = _parse(data, saved_model_pb2.SavedModel(), model_file)
    if not sm.meta_graphs:
        raise GraphFormatError(f"{model_file}: a SavedModel without any MetaGraphDef")
    return sm


def select_meta_graph(sm, tags=None, source="SavedModel"):
    """The MetaGraphDef whose tag set equals `tags` (a list or comma string)."""
    sets = [sorted(mg.meta_info_def.tags) for mg in sm.meta_graphs]
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    if tags:
        for mg, s in zip(sm.meta_graphs, sets):
            if s == sorted(set(tags)):
                return mg
        raise TfgInputError(f"{source}: no MetaGraphDef with tags {','.join(sorted(tags))}; "
                            f"it has {_tag_sets(sets)}")
    if len(sm.meta_graphs) == 1:
        return sm.meta_graphs[0]
    for mg, s in zip(sm.meta_graphs, sets):
        if s == ["serve"]:
            return mg
    raise TfgInputError(f"{source}: several MetaGraphDefs ({_tag_sets(sets)}); pick one "
                        "with --tag")


def _tag_sets(sets):
    return "; ".join(",".join(s) or "(no tags)" for s in sets)


def signatures_of(meta_graph):
    """{signature name: {'method', 'inputs', 'outputs'}} with each tensor's name/dtype/shape."""
    out = {}
    for name in sorted(meta_graph.signature_def):
        sig = meta_graph.signature_def[name]
        out[name] = {"method": sig.method_name,
                     "inputs": {k: _tensor_info(sig.inputs[k]) for k in sorted(sig.inputs)},
                     "outputs": {k: _tensor_info(sig.outputs[k]) for k in sorted(sig.outputs)}}
    return out


def _tensor_info(ti):
    shape = tensors.shape_from_proto(ti.tensor_shape) if ti.HasField("tensor_shape") else None
    return {"name": ti.name or None,
            "dtype": _dtype_name(ti.dtype),
            "shape": None if shape is None else [None if d is None or d < 0 else d
                                                 for d in shape]}


def _dtype_name(number):
    """A TensorInfo's dtype as TensorFlow names it (None: unset; a corrupt number is shown)."""
    if not number:
        return None
    try:
        return DType(number).tf_name
    except ValueError:
        return f"<invalid dtype {number}>"


def load_graph(path, tags=None):
    """The tfg Graph of a SavedModel (or `.meta` file), with `graph.saved_model` set.

    Before: export/1/saved_model.pb holding MetaGraphDefs tagged {serve} and {train}.
    After:  the {serve} GraphDef as a Graph; graph.saved_model.signatures from its SignatureDefs.
            A TF2 SavedModel's function calls come back inlined (graph.saved_model.functions
            says how many, and which could not be), graph.saved_model.saver holds the
            SaverDef's tensor and op names, and graph.saved_model.objects which variable each
            captured handle is.
    """
    path = os.fspath(path)
    sm = read_saved_model(path)
    mg = select_meta_graph(sm, tags, source=path)
    graph = loads(mg.graph_def.SerializeToString(), f"{path} (MetaGraphDef graph_def)")
    functions = None
    fields = unmodelled_fields(mg)
    objects = saved_objects(fields, graph)  # before inlining: it reads the call nodes' inputs
    lib = library_functions(graph)
    if any(is_functional(n, lib) for n in graph):  # a TF2 SavedModel
        inlined = inline_functions(graph, strict=False)
        graph = inlined.graph
        functions = {"inlined": inlined.count, "not_inlined": inlined.skipped}
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    graph.saved_model = SavedModelInfo(
        path=folder, tags=sorted(mg.meta_info_def.tags), signatures=signatures_of(mg),
        available_tags=[sorted(m.meta_info_def.tags) for m in sm.meta_graphs],
        saver=saver_def(mg, fields), functions=functions, objects=objects,
        assets=asset_files(mg, folder), init_ops=init_ops(mg))
    return graph


def asset_files(meta_graph, folder):
    """{tensor name: path} of the MetaGraphDef's assets (vocabulary files a table initializer
    reads): the tensor holds the path the file had when it was exported, and TensorFlow's
    loader feeds it the file's path under `<folder>/assets/` instead.

        >>> asset_files(mg, "export/1")
        {'word_lookup/Const:0': 'export/1/assets/vocab.txt'}

    A filename that would leave assets/ (`../x`, an absolute path) is refused."""
    out = {}
    root = os.path.join(os.path.abspath(folder), "assets")
    for asset in _asset_defs(meta_graph, folder):
        name, filename = asset.tensor_info.name, asset.filename
        path = os.path.normpath(os.path.join(root, filename))
        if not filename or os.path.isabs(filename) or not path.startswith(root + os.sep):
            raise TfgInputError(f"{folder}: asset {filename!r} (tensor {name!r}) is not a file "
                                "name inside the SavedModel's assets/ folder")
        if name:
            out[name] = path
    return out


_ASSET_TYPE = "type.googleapis.com/tensorflow.AssetFileDef"


def _asset_defs(meta_graph, folder):
    """The AssetFileDefs: the MetaGraphDef's own field, else (TF1's builder) the Any values of
    its "saved_model_assets" collection."""
    if meta_graph.asset_file_def:
        return list(meta_graph.asset_file_def)
    coll = meta_graph.collection_def.get("saved_model_assets")
    if coll is None or coll.WhichOneof("kind") != "any_list":
        return []
    out = []
    for value in coll.any_list.value:
        if value.type_url != _ASSET_TYPE:
            continue
        asset = saved_model_pb2.AssetFileDef()
        _parse(value.value, asset, f"{folder}: an AssetFileDef of collection saved_model_assets")
        out.append(asset)
    return out


# Where a SavedModel names the op its loader runs after restoring the variables (table
# initializers): TF2's signature, else TF1's main op, else its legacy init op.
_INIT_SIGNATURE = "__saved_model_init_op"
_INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op")


def init_ops(meta_graph):
    """The node names TensorFlow's loader runs once the variables are restored."""
    sig = meta_graph.signature_def.get(_INIT_SIGNATURE)
    if sig is not None:
        return sorted(parse_input(t.name).node for t in sig.outputs.values() if t.name)
    for key in _INIT_COLLECTIONS:
        coll = meta_graph.collection_def.get(key)
        if coll is not None and coll.WhichOneof("kind") == "node_list" and coll.node_list.value:
            return [parse_input(v).node for v in coll.node_list.value]
    return []


def signature(graph, name):
    """The signature `name` of a graph loaded from a SavedModel (see `signatures_of`)."""
    info = getattr(graph, "saved_model", None)
    if info is None:
        raise TfgInputError("--signature needs a SavedModel (a folder with saved_model.pb)")
    if name not in info.signatures:
        raise TfgInputError(f"no signature {name!r} in {info.path}; it has "
                            f"{', '.join(info.signatures) or 'none'}")
    sig = info.signatures[name]
    for kind in ("inputs", "outputs"):
        for key, ti in sig[kind].items():
            if not ti["name"]:
                raise TfgInputError(f"signature {name!r} {kind[:-1]} {key!r} is a sparse or "
                                    "composite tensor, which tfg does not support")
    return sig


# --- variables/: the tensor bundle -----------------------------------------------------------

def read_variables(path):
    """{variable name: array} from a SavedModel folder's variables/ (or a bundle prefix).

    Before: export/1 (variables/variables.index + variables.data-00000-of-00001).
    After:  {'b1': array([...], dtype=float32), 'w1': array([[...]], dtype=float32), ...}
    """
    path = os.fspath(path)
    prefix = os.path.join(path, "variables", "variables") if os.path.isdir(path) else path
    index_path = prefix + ".index"
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(prefix))
    check_inside(folder, index_path, "variables index")
    try:
        with open(index_path, "rb") as f:
            index = f.read()
    except OSError as e:
        raise TfgInputError(f"cannot read {index_path}: {e.strerror}") from None
    entries = dict(_table_entries(index, index_path))
    header = saved_model_pb2.BundleHeaderProto()
    header.ParseFromString(entries.pop(b"", b""))
    if header.endianness != saved_model_pb2.BundleHeaderProto.LITTLE:
        raise TfgInputError(f"{index_path}: big-endian tensor bundles are not supported")
    num_shards = max(header.num_shards, 1)
    parsed = {}
    for key, value in entries.items():
        name = key.decode("utf-8", "replace")
        entry = parsed[name] = saved_model_pb2.BundleEntryProto()
        try:
            entry.ParseFromString(value)
        except pb_message.DecodeError:
            raise TfgInputError(f"{index_path}: entry {name!r} is not a BundleEntryProto") \
                from None
        if entry.shard_id >= num_shards:
            raise TfgInputError(f"{index_path}: variable {name!r} is in shard "
                                f"{entry.shard_id} of a bundle of {num_shards}")
    check_disjoint([(n, e.shard_id, e.offset, e.size) for n, e in parsed.items()], index_path)
    shards = {}
    out = {}
    for name, entry in parsed.items():
        if entry.shard_id not in shards:
            shard = f"{prefix}.data-{entry.shard_id:05d}-of-{num_shards:05d}"
            check_inside(folder, shard, "variables shard")
            try:
                with open(shard, "rb") as f:
                    shards[entry.shard_id] = f.read()
            except OSError as e:
                raise TfgInputError(f"cannot read {shard}: {e.strerror}") from None
        out[name] = _decode_entry(name, entry, shards[entry.shard_id], prefix)
    return out


def _decode_entry(name, entry, shard, prefix):
    try:
        dtype = DType(entry.dtype)
    except ValueError:  # a corrupt variables index
        raise TfgInputError(f"{prefix}: variable {name!r} has dtype {entry.dtype}, which is not "
                            "a valid DType") from None
    data = shard[entry.offset:entry.offset + entry.size]
    if len(data) != entry.size:
        raise TfgInputError(f"{prefix}: variable {name!r} is truncated")
    shape = tensors.shape_from_proto(entry.shape) or ()
    if any(d is None for d in shape):
        raise TfgInputError(f"{prefix}: variable {name!r} has an unknown dimension")
    if dtype == DType.STRING:
        return _decode_strings(name, entry, data, shape, prefix)
    if dtype.base in (DType.RESOURCE, DType.VARIANT) or dtype.is_ref:
        raise TfgInputError(f"{prefix}: variable {name!r} has dtype {dtype.tf_name}, which a "
                            "bundle cannot hold as bytes")
    check_entry_size(name, dtype, shape, entry.size, prefix)
    if masked_crc32c(data) != entry.crc32c:
        raise TfgInputError(f"{prefix}: variable {name!r} fails its CRC check")
    return np.frombuffer(data, dtype=dtype.np).reshape(shape).copy()


def _decode_strings(name, entry, data, shape, prefix):
    """A string tensor of a bundle: varint64 lengths, a masked CRC-32C of the lengths (taken as
    uint32s), then the bytes; the entry's CRC covers lengths (as uint32), that CRC and the bytes
    (TensorFlow's tensor_bundle writes them this way, e.g. _CHECKPOINTABLE_OBJECT_GRAPH)."""
    count = int(np.prod(shape, dtype=np.float64)) if shape else 1
    if count > len(data):  # each element takes at least its one-byte length
        raise TfgInputError(f"{prefix}: string variable {name!r} claims {count} elements in "
                            f"{len(data)} bytes")
    pos, lengths = 0, []
    for _ in range(count):
        n, pos = read_varint(data, pos)
        lengths.append(n)
    crc = crc32c(b"".join(struct.pack("<I", n & 0xFFFFFFFF) for n in lengths))
    stored = data[pos:pos + 4]
    if len(stored) != 4 or struct.unpack("<I", stored)[0] != mask(crc) or \
            pos + 4 + sum(lengths) != len(data):
        raise TfgInputError(f"{prefix}: string variable {name!r} is malformed")
    body = data[pos + 4:]
    if mask(crc32c(body, crc32c(stored, crc))) != entry.crc32c:
        raise TfgInputError(f"{prefix}: variable {name!r} fails its CRC check")
    out, pos = [], 0
    for n in lengths:
        out.append(bytes(body[pos:pos + n]))
        pos += n
    return np.array(out, dtype=object).reshape(shape)


def _table_entries(data, source):
    """(key, value) of every entry of an SSTable (LevelDB's table format, uncompressed)."""
    if len(data) < _FOOTER_BYTES:
        raise TfgInputError(f"{source}: too short for a table")
    footer = data[-_FOOTER_BYTES:]
    if struct.unpack("<Q", footer[-8:])[0] != _TABLE_MAGIC:
        raise TfgInputError(f"{source}: not a tensor bundle index (bad magic)")
    pos = 0
    _, pos = read_varint(footer, pos)  # metaindex handle: unused
    _, pos = read_varint(footer, pos)
    index_offset, pos = read_varint(footer, pos)
    index_size, pos = read_varint(footer, pos)

    def block(offset, size):
        contents = data[offset:offset + size]
        trailer = data[offset + size:offset + size + 5]
        if len(contents) != size or len(trailer) != 5:
            raise TfgInputError(f"{source}: truncated block at {offset}")
        if trailer[0] != 0:
            raise TfgInputError(f"{source}: compressed blocks are not supported")
        if masked_crc32c(contents + trailer[:1]) != struct.unpack("<I", trailer[1:])[0]:
            raise TfgInputError(f"{source}: block at {offset} fails its CRC check")
        return _block_entries(contents, source)

    for _, handle in block(index_offset, index_size):
        offset, p = read_varint(handle, 0)
        size, _ = read_varint(handle, p)
        yield from block(offset, size)


def _block_entries(block, source):
    if len(block) < 4:
        raise TfgInputError(f"{source}: malformed block")
    (num_restarts,) = struct.unpack("<I", block[-4:])
    end = len(block) - 4 * (num_restarts + 1)
    if end < 0:
        raise TfgInputError(f"{source}: malformed block")
    pos, key = 0, b""
    while pos < end:
        shared, pos = read_varint(block, pos)
        non_shared, pos = read_varint(block, pos)
        value_len, pos = read_varint(block, pos)
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        yield key, block[pos:pos + value_len]
        pos += value_len


def describe(info):
    """The JSON-ready `saved_model` section of `tfg info` for a SavedModelInfo."""
    out = {"path": info.path, "tags": info.tags, "available_tags": info.available_tags,
           "variables": info.variables_prefix is not None, "signatures": info.signatures}
    if info.functions is not None:
        out["functions"] = info.functions
    out["init_ops"] = list(info.init_ops or [])
    out["assets"] = {name: os.path.basename(path) for name, path in (info.assets or {}).items()}
    return out


def format_signatures(info):
    """Text lines for `tfg info`: tags, then each signature's inputs and outputs.

    Before: SavedModelInfo(tags=['serve'], signatures={'serving_default': {...}}).
    After:  ['saved model: tags serve (variables: yes)', 'signatures (1):',
             '  serving_default (tensorflow/serving/predict)', '    in  x: x:0 float32 [?, 4]',
             '    out probs: probs:0 float32 [?, 3]']
    """
    lines = [f"saved model: tags {','.join(info.tags) or '(none)'} (variables: "
             f"{'yes' if info.variables_prefix else 'no'})",
             f"signatures ({len(info.signatures)}):"]
    if info.init_ops:  # what runs once, after the variables are restored (table initializers)
        assets = ", ".join(sorted(os.path.basename(p) for p in (info.assets or {}).values()))
        lines.insert(1, f"init op: {', '.join(info.init_ops)}"
                        + (f" (assets: {assets})" if assets else ""))
    if info.functions is not None:  # TF2: say what was inlined and what cannot run
        skipped = info.functions["not_inlined"]
        lines.insert(1, f"functions: {info.functions['inlined']} calls inlined"
                        f"{f', {len(skipped)} not' if skipped else ''}")
        lines[2:2] = [f"  not inlined: {call}: {skipped[call]}" for call in sorted(skipped)]
    for name, sig in info.signatures.items():
        lines.append(f"  {name} ({sig['method'] or 'no method'})")
        for kind, label in (("inputs", "in "), ("outputs", "out")):
            for key, ti in sig[kind].items():
                shape = "unknown" if ti["shape"] is None else "[" + ", ".join(
                    "?" if d is None else str(d) for d in ti["shape"]) + "]"
                lines.append(f"    {label} {key}: {ti['name'] or '(composite)'} "
                             f"{ti['dtype'] or '?'} {shape}")
    return lines


def run_command(source, info, name=None):
    """A ready-to-paste `tfg run` line for one signature (default: serving_default or the
    first with inputs or outputs), feeding itself: `tfg run export/1 --signature
    serving_default --random-feeds` (string inputs and unknown ranks: `--feed key=@key.npy`)."""
    usable = [n for n, sig in info.signatures.items() if sig["inputs"] or sig["outputs"]]
    if not usable:
        return None
    name = name or ("serving_default" if "serving_default" in usable else usable[0])
    parts = ["tfg", "run", shlex.quote(source or "GRAPH"), "--signature", shlex.quote(name)]
    inputs = info.signatures[name]["inputs"]
    files = [key for key, ti in inputs.items()
             if ti["shape"] is None or ti["dtype"] in (None, "string")]
    if len(files) < len(inputs):
        parts.append("--random-feeds")
    for key in files:
        parts += ["--feed", shlex.quote(f"{key}=@{key.replace('/', '_')}.npy")]
    return " ".join(parts)


def bind_signature(graph, name, feeds, fetches):
    """Feeds and fetches given by a signature's keys -> tensor names (other names pass through).

    Before: signature serving_default = inputs {x: x:0}, outputs {probs: probs:0, classes:
            classes:0}; feeds {'x': [[...]]}; fetches [] (all outputs).
    After:  ({'x:0': [[...]]}, ['classes:0', 'probs:0'], ['classes', 'probs']): the feeds,
            the tensors to fetch, and the names to report them under.
    """
    sig = signature(graph, name)
    inputs, outputs = sig["inputs"], sig["outputs"]
    bound = {}
    for key, value in feeds.items():
        base = key[:-2] if key.endswith(":0") and key[:-2] in inputs else key
        bound[inputs[base]["name"] if base in inputs else key] = value
    keys = list(fetches) or list(outputs)
    tensors = [outputs[k]["name"] if k in outputs else k for k in keys]
    for key, t in zip(keys, tensors):
        check_inlined(graph, [parse_input(t).node], f"signature {name!r} output {key!r}")
    return bound, tensors, keys
