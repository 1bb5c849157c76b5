"""Signatures of TensorFlow's lookup tables (lookup_ops.cc): hash tables that live as long as
the session (HashTableV2, MutableHashTableV2, MutableHashTableOfTensorsV2, and the Anonymous
forms made afresh by each run), their initializers and the ops that read and change them.

    >>> get_op("LookupTableFindV2").stateful, get_op("HashTableV2").attrs["shared_name"].default
    (True, b'')

`tf.lookup.StaticHashTable`, feature columns' vocabularies and Keras' StringLookup write
HashTableV2 + InitializeTableV2 (or InitializeTableFromTextFileV2) + LookupTableFindV2;
`tf.lookup.experimental.MutableHashTable` writes MutableHashTableV2 + Insert/Remove/Export/
Import. A table's handle is a scalar resource that graph inference describes as (value dtype,
value shape) (tfg/graphdef/infer.py _HANDLES): LookupTableFindV2's output is the keys' shape
followed by the value shape, which is what the memory guard sizes it by before it runs.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, merge, merge_dim, scalar, with_rank

_SHARING = ["container: string = ''", "shared_name: string = ''",
            "use_node_name_sharing: bool = false"]
_TYPES = ["key_dtype: type", "value_dtype: type"]


def _handle(ctx):
    """The table handle (input 0) is a scalar, as TensorFlow's shape functions require."""
    with_rank(ctx.shape(0), 0, "table_handle")


def _value_shape(ctx):
    """The table's value shape, when the handle traces back to the op that made the table."""
    handle = ctx.input_handles[0]
    return None if handle is None or handle[1] is None else tuple(handle[1])


def find_shape(ctx):
    """keys' shape + the table's value shape (every table here has scalar keys)."""
    _handle(ctx)
    keys, value_shape = ctx.shape(1), _value_shape(ctx)
    if keys is None or value_shape is None:
        return [None]
    return [tuple(keys) + value_shape]


def initialize_shape(ctx):
    """Keys a vector, values the same shape."""
    _handle(ctx)
    try:
        merge(with_rank(ctx.shape(1), 1, "keys"), ctx.shape(2))
    except ShapeError as e:
        raise ShapeError(f"keys and values must have the same shape: {e}") from None
    return []


def text_file_shape(ctx):
    _handle(ctx)
    with_rank(ctx.shape(1), 0, "filename")
    return []


def handle_only(ctx):
    """Ops with no outputs whose handle must be a scalar (Insert, Remove)."""
    _handle(ctx)
    return []


def size_shape(ctx):
    _handle(ctx)
    return [()]


def export_shape(ctx):
    """keys [?] and values [?] + the value shape: the table's size is known only when it runs."""
    _handle(ctx)
    value_shape = _value_shape(ctx)
    return [(None,), None if value_shape is None else (None,) + value_shape]


def import_shape(ctx):
    """Keys a vector; values as many rows."""
    _handle(ctx)
    keys, values = with_rank(ctx.shape(1), 1, "keys"), ctx.shape(2)
    if values is not None and len(values) >= 1:
        try:
            merge_dim(keys[0], values[0])
        except ShapeError:
            raise ShapeError(f"Dimension 0 in both shapes must be equal, but are {keys[0]} and "
                             f"{values[0]} (keys and values)") from None
    return []


# --- tables
op("HashTableV2",
   outputs=["table_handle: resource"],
   attrs=_SHARING + _TYPES,
   stateful=True, shape_fn=scalar)
op("MutableHashTableV2",
   outputs=["table_handle: resource"],
   attrs=_SHARING + _TYPES,
   stateful=True, shape_fn=scalar)
op("MutableHashTableOfTensorsV2",
   outputs=["table_handle: resource"],
   attrs=_SHARING + _TYPES + ["value_shape: shape = []"],
   stateful=True, shape_fn=scalar)
op("AnonymousHashTable",
   outputs=["table_handle: resource"],
   attrs=_TYPES,
   stateful=True, shape_fn=scalar)
op("AnonymousMutableHashTable",
   outputs=["table_handle: resource"],
   attrs=_TYPES,
   stateful=True, shape_fn=scalar)
op("AnonymousMutableHashTableOfTensors",
   outputs=["table_handle: resource"],
   attrs=_TYPES + ["value_shape: shape = []"],
   stateful=True, shape_fn=scalar)

# --- initializers
op("InitializeTableV2",
   inputs=["table_handle: resource", "keys: Tkey", "values: Tval"],
   attrs=["Tkey: type", "Tval: type"],
   stateful=True, shape_fn=initialize_shape)
op("InitializeTableFromTextFileV2",
   inputs=["table_handle: resource", "filename: string"],
   attrs=["key_index: int >= -2", "value_index: int >= -2", "vocab_size: int >= -1 = -1",
          "delimiter: string = '\\t'", "offset: int = 0"],
   stateful=True, shape_fn=text_file_shape)

# --- reads and updates
op("LookupTableFindV2",
   inputs=["table_handle: resource", "keys: Tin", "default_value: Tout"],
   outputs=["values: Tout"],
   attrs=["Tin: type", "Tout: type"],
   stateful=True, shape_fn=find_shape)
op("LookupTableInsertV2",
   inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
   attrs=["Tin: type", "Tout: type"],
   stateful=True, shape_fn=handle_only)
op("LookupTableRemoveV2",
   inputs=["table_handle: resource", "keys: Tin"],
   attrs=["Tin: type"],
   stateful=True, shape_fn=handle_only)
op("LookupTableSizeV2",
   inputs=["table_handle: resource"],
   outputs=["size: int64"],
   stateful=True, shape_fn=size_shape)
op("LookupTableExportV2",
   inputs=["table_handle: resource"],
   outputs=["keys: Tkeys", "values: Tvalues"],
   attrs=["Tkeys: type", "Tvalues: type"],
   stateful=True, shape_fn=export_shape)
op("LookupTableImportV2",
   inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
   attrs=["Tin: type", "Tout: type"],
   stateful=True, shape_fn=import_shape)
