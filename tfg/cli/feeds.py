"""The feed options of `tfg run` and `tfg compare`: --feed, --feeds, --random-feeds, --dim.

    tfg run model.pb --feeds batch.npz --feed 'x=[[1,2]]'   # --feed replaces batch.npz's x:0
    tfg run model.pb --random-feeds 7 --dim '*=32' --fetch y  # made-up inputs, batch 32

Feeds are keyed by canonical tensor names (`x` and `x:0` are one key), so a `--feed` of a
tensor that `--feeds` holds replaces it, and the same tensor given twice in one source is an
error naming it.
"""
import ast
import json

import click
import numpy as np

from tfg.cli.npy_check import check_npy_file, check_npz
from tfg.errors import TfgInputError
from tfg.executor.sample_feeds import parse_dims, random_feeds
from tfg.graphdef.names import parse_tensor, tensor_name
from tfg.graphdef.nesting import check_literal_depth

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"


def feed_options(f):
    """--feed, --feeds, --random-feeds [SEED] and --dim, in that order in --help."""
    f = click.option("--dim", "dims", multiple=True, metavar="NAME=N",
                     help="With --random-feeds: the size of placeholder NAME's unknown "
                          "dimensions ('*' for every placeholder; default 1).")(f)
    f = click.option("--random-feeds", "random_seed", type=int, is_flag=False, flag_value=0,
                     default=None, metavar="[SEED]",
                     help="Feed every placeholder the run needs and no other flag feeds with "
                          "random values of its dtype and shape (floats in [0,1), ints 0/1); "
                          "SEED defaults to 0.")(f)
    f = click.option("--feeds", "feeds_file", metavar="FILE.npz",
                     help="Feed every array of an .npz (keys are tensor names).")(f)
    f = click.option("--feed", "feed_args", multiple=True, metavar="NAME=VALUE",
                     help="Feed a tensor: a JSON/Python literal, or @file.npy; replaces the "
                          "same tensor of --feeds. Repeatable.")(f)
    return f


def read_feeds(feeds_file, feed_args):
    """{tensor name as given: value} from an .npz and NAME=VALUE strings."""
    feeds, where = {}, {}  # canonical tensor name -> key in feeds
    if feeds_file:
        for key, value in read_npz(feeds_file, "--feeds").items():
            _put(feeds, where, key, value, f"--feeds {feeds_file}", replace=False)
    from_flag = set()
    for arg in feed_args:
        name, sep, text = arg.partition("=")
        name = name.strip()
        if not sep or not name:
            raise TfgInputError(f"--feed {arg!r}: expected NAME=VALUE")
        canonical = _canonical(name)
        if canonical in from_flag:
            raise TfgInputError(f"--feed: tensor {canonical!r} is fed twice")
        from_flag.add(canonical)
        _put(feeds, where, name, _parse_value(name, text.strip()), "--feed", replace=True)
    return feeds


def _canonical(name):
    ref = parse_tensor(name)
    return tensor_name(ref.node, ref.port)


def _put(feeds, where, key, value, source, replace):
    canonical = _canonical(key)
    old = where.get(canonical)
    if old is not None:
        if not replace:
            raise TfgInputError(f"{source}: tensor {canonical!r} is fed twice (as {old!r} "
                                f"and {key!r})")
        del feeds[old]
    where[canonical] = key
    feeds[key] = value


def read_npz(path, flag):
    """{key: array} of an .npz file; anything else is an input error that says what it is."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except FileNotFoundError:
        raise TfgInputError(f"{flag} {path}: no such file") from None
    except OSError as e:
        raise TfgInputError(f"{flag} {path}: cannot read ({e.strerror})") from None
    if head.startswith(_NPY_MAGIC):
        raise TfgInputError(f"{flag} {path}: a .npy file (one array), not an .npz; feed it "
                            "with --feed NAME=@FILE.npy")
    if head[:4] not in _ZIP_MAGIC:
        raise TfgInputError(f"{flag} {path}: not an .npz file (a zip of .npy arrays, as "
                            "numpy.savez or `tfg run -o OUT.npz` writes)")
    check_npz(path, f"{flag} {path}")
    out = {}
    try:
        with np.load(path, allow_pickle=False) as data:
            for key in data.files:
                out[key] = data[key]
    except ValueError as e:
        if "pickle" in str(e):
            raise TfgInputError(f"{flag} {path}: holds Python objects (pickled); tfg reads "
                                "only plain arrays") from None
        raise TfgInputError(f"{flag} {path}: not a readable .npz file "
                            f"({' '.join(str(e).split())})") from None
    except (OSError, EOFError, KeyError) as e:
        raise TfgInputError(f"{flag} {path}: a damaged .npz file "
                            f"({' '.join(str(e).split())})") from None
    return out


def _parse_value(name, text):
    if text.startswith("@"):
        path = text[1:]
        try:
            check_npy_file(path, f"--feed {name}: {path!r}")
            return np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise TfgInputError(f"--feed {name}: no such file {path!r}") from None
        except (OSError, ValueError, EOFError) as e:
            msg = ("holds Python objects (pickled); tfg reads only plain arrays"
                   if "pickle" in str(e) else f"({' '.join(str(e).split())})")
            raise TfgInputError(f"--feed {name}: cannot read {path!r} as .npy {msg}") from None
    check_literal_depth(text, f"--feed {name}")
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise TfgInputError(f"--feed {name}: {text!r} is not a JSON or Python literal "
                            "(or @file.npy)") from None


def add_random_feeds(graph, feeds, needs, seed, dims):
    """`feeds` plus random values for the placeholders `needs` depends on (None seed: none)."""
    if seed is None:
        if dims:
            raise TfgInputError("--dim applies to --random-feeds")
        return feeds
    made = random_feeds(graph, needs, seed=seed, dims=parse_dims(dims), fed=list(feeds))
    return {**feeds, **made}
