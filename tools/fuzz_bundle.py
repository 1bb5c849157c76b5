"""SavedModel bundle mutators for the tfg fuzzer (tools/fuzz.py): hostile model folders.

    python3 tools/fuzz.py --bundle-rounds 8     # with the graph fuzz: every bundle seed x
                                                # bundle mutator x 8 rounds

Seeds are the SavedModel folders under tests/fixtures/savedmodel (with `fuzz.py --real`, the
Keras text models of tests/fixtures/text_models too: lookup tables, string ops, vocabulary
assets, run on their own feeds; and saved_model.pb's graph gets fuzz.REAL's mutators). Each
round copies one into a temporary folder and damages it: a field of one variables-index entry
(offset, size, shard id, dtype, shape, CRC) set to a hostile value, entries added (thousands
over one block, names the graph does not have) or removed, the bundle header (shard count,
endianness, none), the index or data shard bytes (flipped bits, truncation, junk, a missing
shard, a symlink out of the folder), or saved_model.pb (flipped bits, truncation, no meta graph,
signatures naming missing tensors, one of the graph mutators of tools/fuzz.py applied to its
GraphDef). Then `tfg info`, `tfg convert` and `tfg run --signature serving_default
--random-feeds` run on it, judged as the graph fuzz judges its commands (fuzz.problems): exit 0,
or one error line with exit 2 (or 1 for `run`), no traceback, no output file after a failure,
within the time bound.

Before: tests/fixtures/savedmodel/mlp (variables/variables.index says w1 is at offset 0, 128
bytes).  After: a copy whose index says w1 is at offset 2**62 -> `tfg run` must answer
"tfg: error: ...: variable 'w1' is truncated" with exit 2.
"""
import os
import pathlib
import random
import shutil
import sys
import tempfile

from google.protobuf.message import DecodeError

import fuzz
import gen_hostile
from tfg.errors import TfgInputError
from tfg.graphdef.savedmodel import _table_entries
from tfg.schemas.proto import saved_model_pb2

SAVEDMODELS = fuzz.ROOT / "tests" / "fixtures" / "savedmodel"
# Keras text models (lookup tables, string ops, vocabulary assets): seeds with `fuzz.py --real`.
TEXT_MODELS = fuzz.ROOT / "tests" / "fixtures" / "text_models"
GRAPH_MUTATORS = fuzz.STRUCTURAL  # applied to saved_model.pb's graph; --real adds fuzz.REAL
# CI fuzzes these three (a TF1 model, a TF2 one, one with resource variables); full size all.
CI_SEEDS = ("mlp", "tf2_mlp", "v1_resource")
SUBCOMMANDS = ("info", "convert", "run")
HUGE = (1 << 62, 1 << 40, (1 << 31) - 1, -1, -(1 << 40))


def bundle_seeds(names=None, real=False):
    """SavedModel fixture folders (each with saved_model.pb and variables/), by name; with
    `real`, the text models too."""
    folders = sorted(SAVEDMODELS.iterdir())
    if real and TEXT_MODELS.is_dir():
        folders += sorted(TEXT_MODELS.iterdir())
    return [p for p in folders
            if (p / "saved_model.pb").exists() and (p / "variables" / "variables.index").exists()
            and (names is None or p.name in names)]


# --- the variables index as (key, value) pairs, read and rewritten --------------------------
def _index_path(folder):
    return folder / "variables" / "variables.index"


def _read_index(folder):
    """[(key, value)] of the folder's index: b"" is the header, the rest BundleEntryProtos;
    None when an earlier mutation left no index to read (the mutator then does nothing)."""
    path = _index_path(folder)
    try:
        return list(_table_entries(path.read_bytes(), str(path)))
    except (OSError, TfgInputError):
        return None


def _write_index(folder, entries):
    _index_path(folder).write_bytes(gen_hostile._table(entries))


def _shards(folder):
    return sorted((folder / "variables").glob("variables.data-*"))


# --- mutators: each takes (folder, Random) and returns a description, or None ---------------
def b_entry_field(folder, rng):
    """One field of one index entry set to a hostile value (claims far past the shard, a shard
    that does not exist, a dtype that is no DType, dims of 2**31, a wrong CRC)."""
    entries = _read_index(folder) or []
    keyed = [i for i, (k, _) in enumerate(entries) if k]
    if not keyed:
        return None
    i = rng.choice(keyed)
    entry = saved_model_pb2.BundleEntryProto()
    entry.ParseFromString(entries[i][1])
    field = rng.choice(["offset", "size", "shard_id", "dtype", "shape", "crc32c"])
    if field == "offset":
        entry.offset = rng.choice(HUGE + (entry.offset + 1, entry.size))
    elif field == "size":
        entry.size = rng.choice(HUGE + (0, entry.size + 1, max(entry.size - 1, 0)))
    elif field == "shard_id":
        entry.shard_id = rng.choice([1, 7, (1 << 31) - 1, -1])
    elif field == "dtype":
        entry.dtype = rng.choice([0, 7, 9, 20, 21, 101, 999])  # none, string, int64, resource
    elif field == "shape":
        entry.shape.Clear()
        for d in rng.choice([[1 << 31, 1 << 31], [-1], [-5, 3], [1 << 62], [0], [1] * 300]):
            entry.shape.dim.add().size = d
    else:
        entry.crc32c = rng.randrange(1 << 32)
    entries[i] = (entries[i][0], entry.SerializeToString())
    _write_index(folder, entries)
    value = [d.size for d in entry.shape.dim] if field == "shape" else getattr(entry, field)
    return f"entry {entries[i][0]!r}: {field} = {value}"


def b_entry_count(folder, rng):
    """Entries added (thousands over one block; names the graph lacks) or one removed."""
    entries = _read_index(folder) or []
    keyed = [(k, v) for k, v in entries if k]
    if not keyed:
        return None
    kind = rng.choice(["many", "unknown", "remove", "alias"])
    key, value = rng.choice(keyed)
    if kind == "many":
        count = rng.choice([100, 5000])
        entries += [(b"fuzz/%06d" % n, value) for n in range(count)]
        what = f"{count} entries copying {key!r}"
    elif kind == "unknown":
        entries.append((b"fuzz_not_in_graph", value))
        what = f"an entry the graph lacks, copying {key!r}"
    elif kind == "remove":
        entries = [(k, v) for k, v in entries if k != key]
        what = f"entry {key!r} removed"
    else:  # a second name for the same bytes: overlapping regions
        entries.append((key + b"_alias", value))
        what = f"a second entry over the bytes of {key!r}"
    _write_index(folder, entries)
    return what


def b_header(folder, rng):
    """The bundle header (the index's empty key): shard count, endianness, or no header."""
    entries = _read_index(folder)
    if entries is None:
        return None
    header = saved_model_pb2.BundleHeaderProto()
    header.ParseFromString(dict(entries).get(b"", b""))
    field = rng.choice(["num_shards", "num_shards", "endianness", "missing"])
    if field == "num_shards":
        header.num_shards = rng.choice([0, 2, 100, (1 << 31) - 1, -1])
    elif field == "endianness":
        header.endianness = saved_model_pb2.BundleHeaderProto.BIG
    entries = [(k, v) for k, v in entries if k]
    if field != "missing":
        entries.append((b"", header.SerializeToString()))
    _write_index(folder, entries)
    return f"header {field}: {header}".replace("\n", " ").strip()


def _damage_bytes(path, rng):
    """Flip bits, truncate, or append junk to one file -> description."""
    raw = bytearray(path.read_bytes())
    kind = rng.choice(["flip", "truncate", "junk"])
    if kind == "flip" and raw:
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        raw = raw[:rng.randrange(len(raw) + 1)]
    else:
        raw += bytes(rng.randrange(256) for _ in range(rng.choice([1, 100, 4096])))
    path.write_bytes(bytes(raw))
    return f"{path.name}: {kind} ({len(raw)} bytes)"


def b_index_bytes(folder, rng):
    """The index file's bytes: flipped bits (block CRCs, varints, the footer), truncation."""
    return _damage_bytes(_index_path(folder), rng)


def b_shard_bytes(folder, rng):
    """A data shard: damaged bytes, emptied, removed, or a symlink leading out of the folder."""
    shards = _shards(folder)
    if not shards:
        return None
    shard = rng.choice(shards)
    kind = rng.choice(["damage", "damage", "empty", "missing", "symlink"])
    if kind == "damage":
        return _damage_bytes(shard, rng)
    shard.unlink()
    if kind == "empty":
        shard.write_bytes(b"")
    elif kind == "symlink":
        target = rng.choice(["/dev/zero", "/etc/passwd", "../../" + folder.name + ".outside"])
        os.symlink(target, shard)
        return f"{shard.name} is a symlink to {target}"
    return f"{shard.name}: {kind}"


def b_saved_model_pb(folder, rng):
    """saved_model.pb: damaged bytes, no meta graph, signatures naming missing tensors, or one
    of the graph mutators (tools/fuzz.py) applied to the meta graph's GraphDef."""
    path = folder / "saved_model.pb"
    kind = rng.choice(["bytes", "no_meta_graph", "signature", "graph", "graph"])
    if kind == "bytes":
        return _damage_bytes(path, rng)
    sm = saved_model_pb2.SavedModel()
    try:
        sm.ParseFromString(path.read_bytes())
    except DecodeError:  # an earlier mutation (truncate) already damaged it
        return None
    if not sm.meta_graphs:
        return None
    mg = sm.meta_graphs[0]
    if kind == "no_meta_graph":
        del sm.meta_graphs[:]
        what = "no meta graph"
    elif kind == "signature":
        sigs = list(mg.signature_def.values())
        infos = [ti for s in sigs for ti in (*s.inputs.values(), *s.outputs.values())]
        if not infos:
            return None
        ti = rng.choice(infos)
        ti.name = rng.choice(["fuzz_missing:0", "", "x:99", ":0"])
        what = f"a signature tensor named {ti.name!r}"
    else:
        name = rng.choice(tuple(GRAPH_MUTATORS))
        what = GRAPH_MUTATORS[name](mg.graph_def, rng)
        if not what:
            return None
        what = f"graph {name}: {what}"
    path.write_bytes(sm.SerializeToString())
    return what


def b_truncate(folder, rng):
    """Any one file of the model truncated (a copy interrupted part way)."""
    files = [folder / "saved_model.pb", _index_path(folder), *_shards(folder)]
    path = rng.choice(files)
    data = path.read_bytes()
    path.write_bytes(data[:rng.randrange(len(data) + 1)])
    return f"{path.name} truncated to {path.stat().st_size} bytes"


BUNDLE_MUTATORS = {
    "entry_field": b_entry_field, "entry_count": b_entry_count, "header": b_header,
    "index_bytes": b_index_bytes, "shard_bytes": b_shard_bytes,
    "saved_model_pb": b_saved_model_pb, "truncate": b_truncate,
}


def mutate_bundle(seed, mutator, rng, dest):
    """Copy the model folder `seed` to `dest`, apply `mutator` (and sometimes a second one)
    -> [what was done] (empty when the mutators did not apply)."""
    shutil.copytree(seed, dest, symlinks=True)
    names = [mutator] + ([rng.choice(tuple(BUNDLE_MUTATORS))] if rng.random() < 0.25 else [])
    done = []
    for name in names:
        what = BUNDLE_MUTATORS[name](pathlib.Path(dest), rng)
        if what:
            done.append(f"{name}: {what}")
    return done


def seed_feeds(seed):
    """A text model's feeds (NAME_feeds.npz beside its folder: string inputs, which
    --random-feeds cannot make), or None (the other seeds run on random feeds)."""
    path = seed.parent / f"{seed.name}_feeds.npz"
    return path if seed.parent == TEXT_MODELS and path.exists() else None


def commands(model, outdir, feeds=None):
    """{subcommand: (argv, output path or None)} for one mutated model folder."""
    out = pathlib.Path(outdir)
    feed = ["--feeds", feeds] if feeds else ["--random-feeds"]
    cmds = {
        "info": (["info", model, "--json"], None),
        "convert": (["convert", model, "-o", out / "c.pb"], out / "c.pb"),
        "run": (["run", model, "--signature", "serving_default", *feed,
                 "--max-memory", fuzz.RUN_MAX_MEMORY, "-o", out / "r.npz"], out / "r.npz"),
    }
    return {k: ([str(a) for a in argv], o) for k, (argv, o) in cmds.items()}


def fuzz_bundles(seeds, rounds=1, rng_seed=0, mutators=tuple(BUNDLE_MUTATORS),
                 in_process=True, report=None, log=None):
    """Every bundle seed x mutator, `rounds` times, through info/convert/run -> fuzz.Report."""
    report = report or fuzz.Report()
    runner = fuzz.run_in_process if in_process else fuzz.run_as_process
    with tempfile.TemporaryDirectory(prefix="tfg-fuzz-bundle-") as tmp:
        tmp = pathlib.Path(tmp)
        for r in range(rounds):
            for seed in seeds:
                for mutator in mutators:
                    rng = random.Random(f"{rng_seed}/{r}/{seed.name}/{mutator}")
                    model = tmp / f"{seed.name}-{mutator}-{r}"
                    what = mutate_bundle(seed, mutator, rng, model)
                    report.mutators[mutator] += 1
                    outdir = tmp / f"out-{seed.name}-{mutator}-{r}"
                    outdir.mkdir()
                    for sub, (argv, output) in commands(model, outdir,
                                                        seed_feeds(seed)).items():
                        code, err, secs = runner(argv)
                        report.tried[sub] += 1
                        report.codes[sub][code] += 1
                        if secs > report.slowest[0]:
                            report.slowest = (secs, f"({sub} on {seed.name} {mutator})")
                        bad = fuzz.problems(sub, code, err, output)
                        if sub == "run" and code == "hang":  # nothing in these seeds loops
                            bad = [f"no answer within {fuzz.TIME_BOUND_S:.0f}s"]
                        if bad:
                            kept = _keep(model, f"{seed.name}-{mutator}-s{rng_seed}-r{r}")
                            repro = " ".join(argv).replace(str(model), str(kept))
                            report.failures.append(f"{sub} on {seed.name} after {what}: "
                                                   f"{'; '.join(bad)} [repro: tfg {repro}]")
                            if log:
                                log("FAIL " + report.failures[-1])
                    shutil.rmtree(model)
                    shutil.rmtree(outdir)
    return report


def _keep(model, stem):
    """Save a failing model folder where its reproducer can find it."""
    keep = pathlib.Path(os.environ.get("TFG_FUZZ_KEEP", pathlib.Path(tempfile.gettempdir())
                                       / "tfg-fuzz-failures")) / stem
    shutil.rmtree(keep, ignore_errors=True)
    shutil.copytree(model, keep, symlinks=True)
    return keep


if __name__ == "__main__":
    sys.exit("run tools/fuzz.py (--bundle-rounds N): this module holds its bundle mutators")
