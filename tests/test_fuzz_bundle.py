"""Damaged SavedModel folders through info, convert and run: the bundle mutators of
tools/fuzz_bundle.py over tests/fixtures/savedmodel.

Each command must end with exit 0, or one error line with exit 2 (1 for a runtime failure of
`run`), no traceback, no output file after a failure, within the time bound. CI fuzzes three
models x every bundle mutator x 2 rounds (~2 s); TFG_FUZZ_FULL=1 every model x 8 rounds.
"""
import filecmp
import os
import pathlib
import random
import shutil
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
import fuzz  # noqa: E402  (tools/fuzz.py: the runners and the judge)
import fuzz_bundle  # noqa: E402  (tools/fuzz_bundle.py: the bundle mutators)

FULL = bool(os.environ.get("TFG_FUZZ_FULL"))
ROUNDS = 8 if FULL else 2


@pytest.mark.timeout(3600 if FULL else 120)
def test_bundle_mutators_through_info_convert_and_run(tmp_path):
    os.environ["TFG_FUZZ_KEEP"] = str(tmp_path / "failures")
    seeds = fuzz_bundle.bundle_seeds(None if FULL else fuzz_bundle.CI_SEEDS)
    assert len(seeds) >= 3
    fuzz.TIME_BOUND_S = 20.0
    report = fuzz_bundle.fuzz_bundles(seeds, rounds=ROUNDS, rng_seed=0)
    print("\n" + report.summary())
    assert not report.failures, "\n".join(report.failures[:20])
    tried = len(seeds) * len(fuzz_bundle.BUNDLE_MUTATORS) * ROUNDS
    assert all(report.tried[sub] == tried for sub in fuzz_bundle.SUBCOMMANDS)
    # Most damage is refused by `run` (it reads the variables); some mutants are still models.
    assert report.codes["run"][2] > tried // 2 and report.codes["info"][0] > 0


@pytest.mark.parametrize("mutator", sorted(fuzz_bundle.BUNDLE_MUTATORS))
def test_each_bundle_mutator_changes_the_model(tmp_path, mutator):
    """No mutator is a no-op on the mlp model (a fuzz that changes nothing proves nothing)."""
    seed = fuzz_bundle.bundle_seeds(["mlp"])[0]
    changed = 0
    for n in range(4):
        dest = tmp_path / f"m{n}"
        what = fuzz_bundle.mutate_bundle(seed, mutator, random.Random(n), dest)
        files = [p.relative_to(seed) for p in seed.rglob("*") if p.is_file()]
        same, diff, missing = filecmp.cmpfiles(seed, dest, files, shallow=False)
        changed += bool(what) and bool(diff or missing)
    assert changed >= 3, mutator


def _entry_set(folder, name, **fields):
    """Rewrite one variables-index entry of `folder` with `fields`."""
    from tfg.schemas.proto import saved_model_pb2

    entries = fuzz_bundle._read_index(folder)
    for i, (key, value) in enumerate(entries):
        if key == name.encode():
            entry = saved_model_pb2.BundleEntryProto()
            entry.ParseFromString(value)
            for k, v in fields.items():
                setattr(entry, k, v)
            entries[i] = (key, entry.SerializeToString())
    fuzz_bundle._write_index(folder, entries)


@pytest.mark.parametrize("fields, says", [
    ({"offset": 1 << 62}, "variable 'w1' is truncated"),
    ({"size": 1 << 40}, "variables 'w1' and 'w2' share bytes of shard 0"),
    ({"shard_id": 7}, "variable 'w1' is in shard 7 of a bundle of 1"),
    ({"dtype": 999}, "variable 'w1' has dtype 999, which is not a valid DType"),
    ({"crc32c": 12345}, "variable 'w1' fails its CRC check"),
])
def test_damaged_index_entry_is_one_error_line(tmp_path, fields, says):
    """Each field the entry_field mutator sets, named in the one error line of `tfg run`."""
    model = tmp_path / "mlp"
    shutil.copytree(fuzz_bundle.bundle_seeds(["mlp"])[0], model)
    _entry_set(model, "w1", **fields)
    argv, output = fuzz_bundle.commands(model, tmp_path)["run"]
    code, err, secs = fuzz.run_in_process(argv, time_bound=20.0)
    assert code == 2 and says in err and not fuzz.problems("run", code, err, output), err
    assert not output.exists() and secs < 10
