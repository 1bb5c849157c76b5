#!/usr/bin/env bash
# Regenerate the Python modules for tfg/schemas/proto/*.proto (needs the `dev` extra: grpcio-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. tfg/schemas/proto/*.proto
# protoc writes an empty *_pb2_grpc.py for files without services; keep only the real ones.
for f in tfg/schemas/proto/*_pb2_grpc.py; do
  grep -q "class .*Stub" "$f" || rm -f "$f"
done
