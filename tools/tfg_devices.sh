#!/usr/bin/env bash
# `tfg` with `--devices SPEC` added to every `tfg run`: lets the shared conformance checker
# (check.py, which has no device option) run its cases on a GPU.
#   check.py --mode run --tfg "bash tools/tfg_devices.sh gpu:1" CASES...
# Other subcommands (grad, optimize) run unchanged.
spec="$1"
shift
if [ "$1" = "run" ]; then
    exec python3 -m tfg "$@" --devices "$spec"
fi
exec python3 -m tfg "$@"
