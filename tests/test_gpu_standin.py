"""The GPU path in CI: every GPU kernel, an MLP, a CNN and the conformance cases on `gpu:1`
and `cpu:1,gpu:1`, run on the numpy-backed stand-in for CuPy (tfg.kernels.gpu.standin), whose
arrays refuse numpy's functions and host arrays: a kernel that calls `np` on a device array, or
mixes in a host array, fails here as it would on a GPU. Also: host<->device copies happen only
at partition borders, feeds and fetches; placement keeps ops without a GPU kernel on a CPU."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tfg
from tests.conftest import ROOT
from tests.gpu_suite import *  # noqa: F401,F403  (the shared GPU checks run here on the stand-in)
from tests.gpu_suite import _cnn, _lstm_cell, _mlp_train
from tfg import builder as tb
from tfg.executor.devices import STANDIN_ENV
from tfg.executor.session import Session
from tfg.kernels.gpu import standin
from tfg.passes.partition import partition


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setenv(STANDIN_ENV, "1")
    return standin


def test_standin_refuses_numpy_on_device_arrays(gpu):
    a = gpu.asarray(np.ones(3, np.float32))
    assert type(gpu.tanh(a) * 2) is gpu.ndarray
    with pytest.raises(TypeError, match="device array"):
        np.tanh(a)
    with pytest.raises(TypeError, match="device array"):
        np.sum(a)
    with pytest.raises(TypeError):
        np.concatenate([a, a])
    with pytest.raises(TypeError, match="numpy array was mixed"):
        gpu.add(a, np.ones(3, np.float32))
    with pytest.raises(TypeError):
        np.ones(3, np.float32) + a
    with pytest.raises(TypeError):
        np.asarray(a)
    with pytest.raises(AttributeError):
        gpu.errstate  # noqa: B018  (CuPy has none: kernels must use _util.errstate)
    np.testing.assert_array_equal(a.get(), np.ones(3))


def _border_copies(graph, devices, feeds, fetches):
    """The copies a step may make: one per _Recv between a CPU and a GPU partition, one per
    feed and one per fetch."""
    def on_gpu(name):
        name = name.decode() if isinstance(name, bytes) else name
        return "GPU" in name
    recvs = sum(1 for n in partition(graph, devices)
                if n.op == "_Recv" and on_gpu(n.device) != on_gpu(n.get_attr("send_device")))
    return recvs + len(feeds) + len(fetches)


@pytest.mark.parametrize("devices", ["gpu:1", "cpu:1,gpu:1"])
def test_host_device_copies_only_at_borders(devices, gpu):
    graph, names, feeds = _mlp_train()
    s = Session(graph, devices=devices)
    s.run(targets=["init"])
    s.run("loss:0", feeds=feeds, targets=["train"])  # constants reach the device once
    standin.reset_counts()
    s.run("loss:0", feeds=feeds, targets=["train"])
    copies = standin.COUNTS["h2d"] + standin.COUNTS["d2h"]
    limit = _border_copies(graph, devices, feeds, ["loss:0"])
    assert 0 < copies <= limit, (standin.COUNTS, limit)
    if devices == "gpu:1":  # one partition: the two feeds in, the loss out
        assert (standin.COUNTS["h2d"], standin.COUNTS["d2h"]) == (2, 1)


def test_cnn_inference_step_copies_only_feed_and_fetch(gpu):
    graph, fetches, feeds = _cnn()
    s = Session(graph, devices="gpu:1")
    s.run(fetches, feeds=feeds)
    standin.reset_counts()
    s.run(fetches, feeds=feeds)
    assert (standin.COUNTS["h2d"], standin.COUNTS["d2h"]) == (1, len(fetches))


def test_large_feeds_and_fetches_go_through_pinned_memory(gpu, monkeypatch):
    from tests.gpu_suite import _lstm_cell
    monkeypatch.setenv("TFG_GPU_FUSE", "0")
    graph, fetches, feeds = _lstm_cell(batch=64, hidden=32)  # 8 KB each: above the threshold
    s = Session(graph, devices="gpu:1")
    s.run(fetches, feeds=feeds)
    standin.reset_counts()
    got = s.run(fetches, feeds=feeds)
    # 5 feeds staged through pinned buffers reused per size (none allocated again), and each
    # of the 4 fetches copied into a fresh pinned array handed to the caller.
    assert (standin.COUNTS["h2d"], standin.COUNTS["d2h"], standin.COUNTS["pinned"]) == (5, 4, 4)
    want = Session(graph, devices="cpu:1").run(fetches, feeds=feeds)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6)
    small = {k: v[:1, :4].copy() for k, v in feeds.items()}  # 16 bytes: a plain copy
    graph, fetches, _ = _lstm_cell(batch=1, hidden=4)
    s = Session(graph, devices="gpu:1")
    s.run(fetches, feeds=small)  # the constant reaches the device once
    standin.reset_counts()
    s.run(fetches, feeds=small)
    assert standin.COUNTS["pinned"] == 0 and standin.COUNTS["h2d"] == 5


def test_fusion_is_counted_and_off_on_cpu(gpu, monkeypatch):
    from tests.gpu_suite import _lstm_cell
    graph, fetches, feeds = _lstm_cell()
    standin.reset_counts()
    Session(graph, devices="gpu:1").run(fetches, feeds=feeds)
    assert standin.COUNTS["fused"] == 3  # c2, h and tail each one fused call
    s = Session(graph, devices="cpu:1")
    s.run(fetches, feeds=feeds)
    (prepared,) = s._cache.values()
    assert len(prepared.schedules[0].calls) == 21
    assert standin.COUNTS["fused"] == 3


def _tfg(*args, env_gpu=True):
    env = dict(os.environ)
    if env_gpu:
        env[STANDIN_ENV] = "1"
    return subprocess.run([sys.executable, "-m", "tfg", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _random_graph(tmp_path, device=""):
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        tb.add(tb.tanh(x), tb.random_uniform([2, 3], seed=1), name="y")
    for node in g.graph:
        node.device = device
    path = tmp_path / "g.pb"
    tfg.save(g.graph, str(path))
    return path


def test_cli_places_ops_without_gpu_kernel_on_cpu(tmp_path):
    """Every node asks for GPU:0; RandomUniform has no GPU kernel, so soft placement puts it
    on the CPU with a warning, and `tfg place` shows it (no CuPy needed to place)."""
    path = _random_graph(tmp_path, device="/device:GPU:0")
    p = _tfg("place", str(path), "--devices", "cpu:1,gpu:1", "--format", "pbtxt", env_gpu=False)
    assert p.returncode == 0, p.stderr
    assert "RandomUniform" in p.stderr  # the soft-placement warning names the op
    text = p.stdout
    block = text[text.index('op: "RandomUniform"'):]
    assert "device:CPU:0" in block[:block.index("}")]
    block = text[text.index('op: "Tanh"'):]
    assert "device:GPU:0" in block[:block.index("}")]


def _device_of(pbtxt, op):
    block = pbtxt[pbtxt.index(f'op: "{op}"'):]
    return block[:block.index("}")]


def test_cli_gpu_only_runs_ops_without_a_gpu_kernel_on_the_host(tmp_path):
    """`--devices gpu:1` comes with the host's CPU, as in TensorFlow: RandomUniform (no GPU
    kernel) goes there, everything a GPU runs stays on the GPU, and the values are the CPU's."""
    path = _random_graph(tmp_path)
    p = _tfg("place", str(path), "--devices", "gpu:1", "--format", "pbtxt", env_gpu=False)
    assert p.returncode == 0, p.stderr
    assert "device:CPU:0" in _device_of(p.stdout, "RandomUniform")
    for op in ("Tanh", "AddV2", "Placeholder"):
        assert "device:GPU:0" in _device_of(p.stdout, op), op
    outs = {}
    for devices in ("cpu:1", "gpu:1"):
        out = tmp_path / f"{devices.replace(':', '')}.npz"
        p = _tfg("run", str(path), "--devices", devices, "--feed", "x=[[1,2,3],[4,5,6]]",
                 "--fetch", "y", "-o", str(out))
        assert p.returncode == 0, p.stderr
        outs[devices] = np.load(out)["y"]
    np.testing.assert_allclose(outs["gpu:1"], outs["cpu:1"], rtol=1e-6)


def test_cli_gpu_request_without_a_gpu_kernel_is_an_error_when_not_soft(tmp_path):
    path = _random_graph(tmp_path, device="/device:GPU:0")
    p = _tfg("place", str(path), "--devices", "gpu:1", "--no-soft-placement", env_gpu=False)
    assert p.returncode == 2
    assert "RandomUniform" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_cli_run_on_gpu_and_split_matches_cpu(tmp_path):
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        tb.reduce_sum(tb.tanh(tb.matmul(x, tb.constant(np.eye(3, dtype=np.float32)))),
                      axis=1, name="y")
    path = tmp_path / "g.pb"
    tfg.save(g.graph, str(path))
    outs = {}
    for devices in ("cpu:1", "gpu:1", "cpu:1,gpu:1"):
        out = tmp_path / f"{devices.replace(':', '').replace(',', '_')}.npz"
        p = _tfg("run", str(path), "--devices", devices, "--feed", "x=[[1,2,3],[4,5,6]]",
                 "--fetch", "y", "-o", str(out))
        assert p.returncode == 0, p.stderr
        outs[devices] = np.load(out)["y"]
    np.testing.assert_allclose(outs["gpu:1"], outs["cpu:1"], rtol=1e-6)
    np.testing.assert_allclose(outs["cpu:1,gpu:1"], outs["cpu:1"], rtol=1e-6)


def test_fused_cuda_source_for_a_group(gpu, monkeypatch):
    """What CuPy compiles for a group (the stand-in runs the composition instead): one
    statement per node in schedule order, external inputs deduplicated, the root's value out."""
    from tests.gpu_suite import _lstm_cell
    from tfg.kernels.gpu import fusion
    graph, fetches, feeds = _lstm_cell()
    s = Session(graph, devices="gpu:1")
    s.run(fetches, feeds=feeds)
    (prepared,) = s._cache.values()
    plan = prepared.plans[0]
    runnable = [it for it in plan.items if it.kind == "kernel"]
    ins = {it.id: [None] * it.num_inputs for it in plan.items}
    for it in plan.items:
        for dst, port, idx in it.out_edges:
            if port >= 0:
                ins[dst][idx] = (it.id, port)
    fetched = {it.id for it in runnable if it.fetch_ports}
    groups = {g[-1].name: g for g in fusion.fuse_groups(runnable, ins, fetched)}
    assert sorted(groups) == ["c2", "h", "tail"]
    h = groups["h"]
    assert [it.op for it in h][-1] == "Mul" and sorted(it.op for it in h) == [
        "Mul", "Sigmoid", "Tanh"]
    external, wiring = fusion.wire(h, ins)
    params, out, body = fusion.kernel_source(h, wiring, len(external))
    assert params == "float32 in0, float32 in1" and out == "float32 out0"
    assert body.endswith("float t2 = t0 * t1; out0 = t2;") or \
        body.endswith("float t2 = t1 * t0; out0 = t2;"), body
    assert "tanh(in" in body and "exp(-fabs(in" in body


def test_gpu_alone_keeps_a_graph_with_gpu_kernels_unpartitioned(gpu):
    """`gpu:1` holds the host's CPU too, but a graph whose ops all have GPU kernels runs as one
    GPU partition (unpartitioned, with the step rewrites), as a one-device set runs it."""
    graph, fetches, feeds = _lstm_cell()
    s = Session(graph, devices="gpu:1")
    assert [d.short for d in s.backend.devices] == ["GPU:0", "CPU:0"]
    s.run(fetches, feeds=feeds)
    assert s.backend._graph() is graph
    assert s.backend.rewrites  # the one-device step rewrites ran


def test_gpu_alone_runs_a_keras_lstm_wholly_on_the_gpu(gpu):
    """A Keras LSTM on `gpu:1`: its TensorList ops have GPU kernels, so nothing needs the
    host's CPU, the graph runs unpartitioned on the GPU, and the values are TensorFlow's."""
    from case_check import load_run_case
    from conftest import FIXTURES
    meta, graph, feeds, expected = load_run_case(str(FIXTURES / "real_models" / "keras_lstm"))
    s = Session(graph, devices="gpu:1")
    standin.reset_counts()
    (got,) = s.run(meta["fetches"], feeds=feeds)
    np.testing.assert_allclose(got, expected[0], rtol=meta["rtol"], atol=meta["atol"])
    assert s.backend._graph() is graph
    assert standin.COUNTS["d2h"] <= 2  # the fetch (and no item of a list each iteration)


def test_a_list_crossing_devices_is_copied_item_by_item(gpu):
    """A TensorList arriving at a device (a _Recv) holds its items in that device's memory,
    as TensorFlow's variant device copy does; unset items stay unset, the source is unchanged."""
    from tfg.kernels.list_ops import TensorList
    from tfg.kernels.memory import received
    from tfg.schemas.dtypes import DType
    host = TensorList(DType.FLOAT, (2,), [np.ones(2, np.float32), None])
    on_gpu = received(gpu, host)
    assert type(on_gpu.items[0]) is gpu.ndarray and on_gpu.items[1] is None
    assert type(host.items[0]) is np.ndarray
    back = received(np, on_gpu)
    assert type(back.items[0]) is np.ndarray
    np.testing.assert_array_equal(back.items[0], host.items[0])
