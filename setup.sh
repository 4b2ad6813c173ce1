#!/usr/bin/env bash
# One command from a fresh clone: create .venv, install torch and ipexconvert, then convert a
# built-in model (all-MiniLM-L6-v2, real weights) to a bf16 artifact, check it and time it,
# then to an INT8 artifact calibrated on built-in sentences.
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
echo "==> ipexconvert optimize example:minilm --dtype int8 (calibrated on built-in sentences, SmoothQuant, accuracy guard)"
.venv/bin/python -c "from ipexconvert.examples.sentences import CALIBRATION_SENTENCES as s; open('build/calib.txt', 'w').write('\n'.join(s) + '\n')"
.venv/bin/ipexconvert optimize example:minilm --dtype int8 --calib-text build/calib.txt -o build/minilm.int8.ipxc --no-timing
echo "==> ipexconvert bench (int8)"
.venv/bin/ipexconvert bench build/minilm.int8.ipxc --against example:minilm --rounds 10
