"""Lossy transfer compression (issue 19, white paper 5.5): float32 crosses devices and tasks
as its upper 16 bits, the receiver filling the low 16 bits with zeros."""
import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from tfg import builder as tb
from tfg.executor.distributed import rpc
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.partition import partition
from tfg.schemas import truncate

SPECIALS = np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45,
                       3.4028235e38, 1.17549435e-38, np.pi, 1 / 3, 65504.0, 1.00390625])


def sample():
    rng = np.random.RandomState(0)
    bits = rng.randint(0, 2**32, size=2025, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([SPECIALS, bits.view(np.float32)])


def expected(x):
    """The rule, in bits: keep the upper 16, zero the lower 16."""
    return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def test_truncation_rule_is_bit_exact():
    x = sample()
    words = truncate.truncate(x)
    assert words.dtype == np.uint16 and words.shape == x.shape
    assert np.array_equal(words, (x.view(np.uint32) >> 16).astype(np.uint16))
    assert same_bits(truncate.widen(words), expected(x))
    assert same_bits(truncate.roundtrip(x.reshape(40, -1)), expected(x).reshape(40, -1))
    assert truncate.roundtrip(np.float32(2.71828)).shape == ()
    # Truncation, not rounding to nearest: 7 mantissa bits are kept, and 1 + 2**-7 + 2**-8 +
    # 2**-9 (nearer to 1 + 2**-6) goes down to 1 + 2**-7.
    assert truncate.roundtrip(np.float32(1 + 2**-7 + 2**-8 + 2**-9)) == np.float32(1 + 2**-7)


def two_device_graph():
    g = tb.Graph()
    with g:
        with tb.device("/device:CPU:0"):
            x = tb.placeholder(tb.float32, [None], name="x")
            n = tb.placeholder(tb.int32, [None], name="n")
            a = tb.identity(x, name="a")
            m = tb.identity(n, name="m")
        with tb.device("/device:CPU:1"):
            tb.identity(a, name="y")
            tb.identity(m, name="k")
    return g.graph


def test_partition_marks_float32_pairs_and_the_executor_truncates(tmp_path):
    parted = partition(two_device_graph(), "cpu:2", compress="bf16")
    marked = {n.name: n.op for n in parted if n.has_attr(truncate.COMPRESS_ATTR)}
    assert sorted(marked.values()) == ["_Recv", "_Send"]  # the int32 pair is left alone
    io.save(parted, str(tmp_path / "p.pb"))
    again = io.load(str(tmp_path / "p.pb"))  # the attr survives the GraphDef
    x = sample()
    n = np.arange(-5, 5, dtype=np.int32)
    with Session(again, devices="cpu:2") as sess:
        y, k = sess.run(["y", "k"], feeds={"x": x, "n": n})
    assert y.dtype == np.float32 and same_bits(y, expected(x))
    np.testing.assert_array_equal(k, n)
    plain = partition(two_device_graph(), "cpu:2")
    with Session(plain, devices="cpu:2") as sess:
        assert same_bits(sess.run("y", feeds={"x": x, "n": n}), x)


def test_recv_tensor_answer_is_half_the_bytes_and_widens_exactly():
    x = sample().reshape(40, -1)
    first, rest = rpc.first_chunk(x, False, chunk_bytes=1000, compress="bf16")
    assert first.truncated and first.total_bytes == x.size * 2
    got, dead = rpc.assemble([first] + list(rpc.rest_chunks(rest, chunk_bytes=1000)))
    assert not dead and got.dtype == np.float32 and same_bits(got, expected(x))
    ints = np.arange(7, dtype=np.int64)
    first, _ = rpc.first_chunk(ints, False, compress="bf16")  # other dtypes travel whole
    assert not first.truncated and np.array_equal(rpc.assemble([first])[0], ints)


def test_compress_transfers_needs_a_cluster_in_tfg_run():
    p = subprocess.run([sys.executable, "-m", "tfg", "run", "--compress-transfers", "bf16",
                        "--fetch", "y"], capture_output=True, timeout=60, cwd=ROOT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and b"tfg partition --compress-transfers" in p.stderr


def test_data_parallel_training_converges_with_compressed_transfers_on_two_workers(capsys):
    path = ROOT / "examples" / "data_parallel" / "train.py"
    spec = importlib.util.spec_from_file_location("data_parallel_train", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # Exit 0: the loss falls below 0.6 of the first and stays within 0.05 of exact training.
    assert example.main(["--workers", "2", "--steps", "15", "--compress-transfers", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "--compress-transfers bf16" in out


@pytest.mark.parametrize("mode", ["none", "bf16"])
def test_tfg_partition_flag(tmp_path, mode):
    io.save(two_device_graph(), str(tmp_path / "g.pb"))
    p = subprocess.run([sys.executable, "-m", "tfg", "partition", str(tmp_path / "g.pb"),
                        "--devices", "cpu:2", "--compress-transfers", mode, "-o",
                        str(tmp_path / "p.pbtxt")], capture_output=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert ("_tfg_compress" in (tmp_path / "p.pbtxt").read_text()) == (mode == "bf16")
