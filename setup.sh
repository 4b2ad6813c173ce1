#!/usr/bin/env bash
# One command from a fresh clone: create .venv, install torch and ipexconvert, then convert a
# built-in model (all-MiniLM-L6-v2, real weights) to a bf16 artifact, check it and time it.
#   ./setup.sh            set up and run the demo
#   ./setup.sh --no-demo  set up only
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
echo "==> installing torch 2.13.0 (CPU) and ipexconvert with its test/example extras"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test]"

if [ "${1:-}" = "--no-demo" ]; then
  exit 0
fi
mkdir -p build
echo "==> ipexconvert doctor"
.venv/bin/ipexconvert doctor
echo "==> ipexconvert optimize example:minilm --dtype bf16"
.venv/bin/ipexconvert optimize example:minilm --dtype bf16 -o build/minilm.bf16.ipxc
echo "==> ipexconvert check (artifact vs eager PyTorch on the stored example inputs)"
.venv/bin/ipexconvert check build/minilm.bf16.ipxc --reference example:minilm
echo "==> ipexconvert bench"
.venv/bin/ipexconvert bench build/minilm.bf16.ipxc --against example:minilm --rounds 10
