"""Regression cases of tools/hostile_sweep.py: each once failed the CLI contract (a hang, all
memory, a traceback, a device node replaced, a wrong answer accepted). The cases are built by
tools/hostile_cases.py and run in forked children under an address-space limit, as the sweep
runs them; `python3 tools/hostile_sweep.py` runs all of them (about 10 minutes)."""
import os
import pathlib
import stat
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import hostile_cases  # noqa: E402
import hostile_sweep  # noqa: E402

# name -> what it did before the fix
FIXED = {
    "rt_maxpool_ksize_huge": "MaxPool 2**30 SAME window: run and optimize hung at 2.8 GB",
    "rt_avgpool_ksize_huge": "AvgPool likewise",
    "rt_maxpoolv2_ksize_huge": "MaxPoolV2 (window from an input) likewise",
    "fn_wrong_tout": "PartitionedCall with Tout of 2 for a 1-output function ran",
    "enter_frame_mismatch": "an Add of two loops' Enters ran and gave a value",
    "placeholder_neg_dim": "a Placeholder of shape [-5, 3] took any feed",
    "placeholder_rank_unknown_and_dims": "unknown rank with dims accepted",
    "const_complex": "half a complex value: internal ValueError",
    "frames_1000_deep": ("place/partition: RecursionError", ("place", "partition")),
    "rt_squeeze_axis_bad": "Squeeze(squeeze_dims=[0, 5]) of [2, 3] returned the input",
    "rt_stridedslice_two_ellipsis": "two ellipses accepted",
    "rt_reverse_axis_dup": "ReverseV2 axis [0, 0] accepted",
    "feed_npz_not_zip": "internal BadZipFile",
    "feed_npz_zip_bomb": "an .npz declaring 8 GiB: out of memory",
    "feed_npy_huge_header": "a 130-byte .npy declaring 4 EiB: out of memory",
    "path_dev_zero": "GRAPH=/dev/zero: out of memory",
    "path_dev_urandom": "GRAPH=/dev/urandom: hang",
    "stdin_empty": "click's usage error on four lines",
    "out_is_dir": "-o DIR: internal IsADirectoryError",
    "out_dev_full": "-o /dev/full: exit 0, the device node replaced by a file (as root)",
    "flag_devices_huge": "--devices cpu:99999999: hang",
    "flag_max_memory_huge": "--max-memory 1e400: internal OverflowError",
    "flag_cluster_json_deep": "--cluster of [[[[...: internal RecursionError",
    "flag_cost_model_deep": "--cost-model of [[[[...: internal RecursionError",
    "flag_cluster_port_huge": "port 99999 dialed 34463 (exit 1)",
    "flag_cluster_json_list": "--cluster of [1, 2]: internal AttributeError",
    "flag_worker_bind_garbage": "gRPC's log lines before the error",
    # stop 45's sweep
    "count_attr_huge_AddN": "AddN N=2**62: grad/place/partition/run out of memory (exit 1)",
    "count_attr_huge_ConcatV2": "ConcatV2 N=2**62 likewise",
    "render_long_device": "a 100k-character device: dot quit, tfg exited 1 saying nothing",
    "render_nul_device": "a NUL in a device: dot's syntax error, exit 1 on two lines",
    "render_long_name": "a 20k-character node name: exit 1 saying nothing",
    "contract_npz_encrypted": "an encrypted .npz member: internal RuntimeError",
    "contract_npz_bomb_no_suffix": "a member without .npy (1 GiB of zeros): read whole",
    "contract_compare_bomb_no_suffix": "compare likewise",
    "contract_string_lone_surrogate": "'\\udcff' in a string feed: internal UnicodeEncodeError",
    "contract_save_missing_parent": "--save under a file: internal NotADirectoryError",
    "contract_compare_rtol_nan": "--rtol nan accepted: every output 'differs', exit 1",
    "contract_export_trace_bad_values": "a trace's 'ts' of 'a': internal ValueError",
    "contract_export_logdir_under_file": "LOGDIR under a file: internal NotADirectoryError",
    "contract_render_trace_bad_values": "a trace's 'dur' object: internal TypeError",
    "contract_tensorproto_as_graph": "a TensorProto read as an empty GraphDef, exit 0",
    "contract_place_device_type_unknown": "place --devices 'gp u:1' placed on a 'gp u' device",
    # stop 46
    "contract_loopcond_int32_optimize": "a LoopCond of an int32: run refused it, optimize "
                                        "wrote it",
    "contract_loopcond_int32_place": "place likewise",
    "contract_loopcond_int32_partition": "partition likewise",
    # real-model fuzz (tools/fuzz.py --real)
    "rt_stridedslice_spec_splat": "a StridedSlice spec of 2**27 entries: info/optimize took "
                                  "30 s of CPU walking it",
}


@pytest.fixture(scope="module")
def cases():
    hostile_sweep._preload()
    return {c.name: c for c in hostile_cases.all_cases() if c.name in FIXED}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_hostile_case(cases, name, tmp_path):
    case = cases[name]
    if isinstance(FIXED[name], tuple):  # only the commands that failed (the rest are slow)
        labels = FIXED[name][1]
        case = hostile_cases.Case(name, case.files, [c for c in case.commands
                                                     if c.label in labels])
    results = hostile_sweep.run_case(case, hostile_sweep.run_forked, tmp_path)
    bad = [f"{cmd.label}: {'; '.join(problems)}" for cmd, _, _, _, problems, _ in results
           if problems]
    assert not bad, f"{name} ({FIXED[name]}):\n" + "\n".join(bad)


def test_devices_are_still_devices():
    for dev in ("/dev/null", "/dev/full"):
        if os.path.exists(dev):
            assert stat.S_ISCHR(os.stat(dev).st_mode), dev
