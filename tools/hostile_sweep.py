#!/usr/bin/env python3
"""Hand-written hostile inputs through every subcommand, each checked against the CLI contract.

    python3 tools/hostile_sweep.py                 # every case, forked children (fast)
    python3 tools/hostile_sweep.py -k recursion    # cases whose name contains a word
    python3 tools/hostile_sweep.py -x 100k         # all but the 100,000-node graphs
    python3 tools/hostile_sweep.py --processes     # each command as `python -m tfg` (slower)
    python3 tools/hostile_sweep.py --list          # the case names
    python3 tools/hostile_sweep.py --show NAME     # write the case's files, print its commands

tools/fuzz.py mutates real graphs at random; this sweep is the other half: inputs built by
hand to reach one guard each (recursive functions, bad frames, hostile sizes met at run time,
feed files holding objects, truncated protobuf at every offset, odd output paths, hostile
flags). The cases live in tools/hostile_cases.py. Every command runs with an address-space
limit (RLIMIT_AS: 3 GB, or 3 GB more than the driver holds for a forked child) and a
wall-clock bound, and must: end with an allowed exit code (2 for bad
input, 1 for a failure while running, 0 where the input is in fact valid), print ONE line on
stderr (`tfg: error: ...`, warnings aside) with no traceback and no "internal error", name the
node or flag when the case says which, leave no output file (nor temp file) when it failed,
and not run out of memory. tests/test_hostile_sweep.py runs the cases that once failed.
"""
import argparse
import os
import pathlib
import resource
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
for p in (str(ROOT), str(ROOT / "tools")):
    if p not in sys.path:
        sys.path.insert(0, p)

import hostile_cases  # noqa: E402  (tools/hostile_cases.py)

ADDRESS_SPACE = 3 << 30
TIMEOUT_S = 30.0


def _limit_memory(on_top_of_this_process=False):
    """Cap the address space at ADDRESS_SPACE, or (a forked child, which starts with its
    parent's mappings) at ADDRESS_SPACE more than it holds now: a pytest worker that has
    loaded numba's LLVM (~320 MB of address space) or many tests' buffers would otherwise
    leave its children no room, and every command would 'run out of memory' at its first
    allocation."""
    limit = ADDRESS_SPACE + (_address_space() if on_top_of_this_process else 0)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _address_space():
    """This process's mapped address space in bytes (VmSize), 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _preload():
    """Import every subcommand once, so a forked child starts in milliseconds."""
    import importlib

    from tfg.cli import SUBCOMMANDS

    for module, _ in SUBCOMMANDS.values():
        importlib.import_module(module)


def run_forked(argv, cwd, stdin_path=None, timeout=TIMEOUT_S):
    """tfg.cli.main(argv) in a forked child under the limits -> (rc or 'hang', stdout, stderr,
    seconds, peak RSS bytes)."""
    from tfg.cli import main

    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        try:
            _limit_memory(on_top_of_this_process=True)
            os.chdir(cwd)
            fd = os.open(stdin_path or os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            os.dup2(out_f.fileno(), 1)
            os.dup2(err_f.fileno(), 2)
            sys.stdin = open(0, "r", closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            code = 0
            try:
                main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - the child must never return into the driver
            import traceback

            traceback.print_exc()
            code = 99
        os._exit(code)
    return _wait(pid, start, timeout, out_f, err_f)


def run_process(argv, cwd, stdin_path=None, timeout=TIMEOUT_S):
    """`python -m tfg ARGV` under the limits -> as run_forked."""
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.monotonic()
    with open(stdin_path or os.devnull, "rb") as stdin:
        p = subprocess.Popen([sys.executable, "-m", "tfg", *argv], stdout=out_f, stderr=err_f,
                             stdin=stdin, cwd=cwd, env=env, preexec_fn=_limit_memory)
    return _wait(p.pid, start, timeout, out_f, err_f)


def _wait(pid, start, timeout, out_f, err_f):
    status = rusage = None
    while time.monotonic() - start < timeout:
        got, status, rusage = os.wait4(pid, os.WNOHANG)
        if got:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        _, status, rusage = os.wait4(pid, 0)
        status = None
    seconds = time.monotonic() - start
    rc = "hang" if status is None else os.waitstatus_to_exitcode(status)
    out_f.seek(0)
    err_f.seek(0)
    return rc, out_f.read(), err_f.read().decode("utf-8", "replace"), seconds, \
        rusage.ru_maxrss * 1024


def problems(cmd, rc, err, workdir):
    """What is wrong with one outcome (empty when it kept the contract)."""
    bad = []
    if rc == "hang":
        return [] if cmd.waits else [f"no answer within {cmd.timeout:.0f} s"]
    if rc not in cmd.allowed:
        bad.append(f"exit {rc} (allowed {sorted(cmd.allowed)})")
    if "Traceback" in err:
        bad.append("traceback on stderr")
    if "internal error" in err:
        bad.append("internal error")
    if "out of memory" in err:
        bad.append("ran out of memory (a guard should refuse first)")
    if rc != 0:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        errors = [ln for ln in lines if not ln.startswith("tfg: warning")]
        if len(errors) != 1 or not errors[-1].startswith("tfg: error: "):
            bad.append(f"stderr is not one error line: {err[-400:]!r}")
        if cmd.says and not any(s in err for s in cmd.says):
            bad.append(f"error does not name {cmd.says}: {err.strip()[:300]!r}")
        if cmd.output and (workdir / cmd.output).exists() \
                and not (workdir / cmd.output).is_dir() and cmd.output not in cmd.keep:
            bad.append(f"failed but left {cmd.output}")
    for dev in ("/dev/null", "/dev/full", "/dev/zero"):
        if os.path.exists(dev) and not stat.S_ISCHR(os.stat(dev).st_mode):
            bad.append(f"{dev} is no longer a device (replaced by a file)")
    left = [p.name for p in workdir.rglob(".tfg-*")] + [p.name for p in workdir.rglob(".tmp-*")]
    if left:
        bad.append(f"temporary files left: {left}")
    return bad


def run_case(case, runner, base):
    """Write the case's files into a fresh folder, run its commands -> [(cmd, rc, secs, rss,
    problems, stderr)]."""
    workdir = pathlib.Path(tempfile.mkdtemp(prefix=f"{case.name[:40]}-", dir=base))
    case.write(workdir)
    results = []
    for cmd in case.commands:
        for out in [cmd.output] if cmd.output else []:
            p = workdir / out
            if p.exists() and p.is_file() and out not in cmd.keep:
                p.unlink()
        stdin = workdir / cmd.stdin if cmd.stdin else None
        rc, _, err, secs, rss = runner(cmd.argv, workdir, stdin, cmd.timeout)
        results.append((cmd, rc, secs, rss, problems(cmd, rc, err, workdir), err))
    return results


def reproduce(case, cmd):
    stdin = f" < {cmd.stdin}" if cmd.stdin else ""
    return (f"python3 tools/hostile_sweep.py --show {case.name}  # then in its folder: "
            f"PYTHONPATH={ROOT} python3 -m tfg {shlex.join(cmd.argv)}{stdin}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", action="append", default=[], help="only cases whose name has this")
    ap.add_argument("-x", action="append", default=[], help="skip cases whose name has this")
    ap.add_argument("--processes", action="store_true", help="each command as its own process")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--show", metavar="NAME")
    ap.add_argument("-v", action="store_true", help="print every command's outcome")
    args = ap.parse_args()
    cases = hostile_cases.all_cases()
    if args.k:
        cases = [c for c in cases if any(k in c.name for k in args.k)]
    if args.x:
        cases = [c for c in cases if not any(x in c.name for x in args.x)]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    if args.show:
        case = next(c for c in cases if c.name == args.show)
        folder = pathlib.Path(tempfile.mkdtemp(prefix=f"{case.name}-"))
        case.write(folder)
        print(f"cd {folder}")
        for cmd in case.commands:
            stdin = f" < {cmd.stdin}" if cmd.stdin else ""
            print(f"PYTHONPATH={ROOT} python3 -m tfg {shlex.join(cmd.argv)}{stdin}")
        return 0
    if args.processes:
        runner = run_process
    else:
        _preload()
        runner = run_forked
    base = pathlib.Path(tempfile.mkdtemp(prefix="tfg-hostile-sweep-"))
    failures, commands, start = [], 0, time.monotonic()
    for case in cases:
        for cmd, rc, secs, rss, bad, err in run_case(case, runner, base):
            commands += 1
            line = f"{case.name:40s} {cmd.label:10s} rc={rc!s:4s} {secs:5.1f}s {rss >> 20:5d}M"
            if bad:
                failures.append((case, cmd, bad, err))
                print(f"FAIL {line} {'; '.join(bad)[:300]}", flush=True)
            elif args.v:
                print(f"ok   {line} {err.strip()[:150]}", flush=True)
    print(f"{len(cases)} cases, {commands} commands, {len(failures)} failures, "
          f"{time.monotonic() - start:.0f} s (files under {base})")
    for case, cmd, bad, err in failures:
        print(f"\n{case.name} / {cmd.label}: {'; '.join(bad)}\n  {reproduce(case, cmd)}\n"
              f"  stderr: {err.strip()[-600:]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
