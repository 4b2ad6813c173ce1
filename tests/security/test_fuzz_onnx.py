"""The ONNX frontend's fuzzer (fuzz/fuzz_onnx.py), a short run in CI: `pytest -k fuzz tests/security`.

Mutated small ONNX models (attributes, weights' dims, types and bytes, input dims, node inputs and op types,
dropped and doubled nodes, opsets, outputs, integer constants) are converted in forked children. Each must
convert or be refused with an ipexconvert error and leave no output file: no other exception, crash, hang,
out-of-memory or code execution. The run is deterministic for a seed and tree (IPEXCONVERT_FUZZ_SEED); the longer
run is `python fuzz/fuzz_onnx.py --seconds 600`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")

REPO = Path(__file__).resolve().parents[2]
CASES = int(os.environ.get("IPEXCONVERT_FUZZ_ONNX_CASES", "40"))
SEED = int(os.environ.get("IPEXCONVERT_FUZZ_SEED", "1"))


@pytest.mark.slow
def test_fuzz_onnx_frontend(tmp_path):
    summary_path = tmp_path / "summary.json"
    cmd = [sys.executable, str(REPO / "fuzz" / "fuzz_onnx.py"), "--seconds", "900", "--max-cases", str(CASES),
           "--seed", str(SEED), "--out", str(tmp_path / "findings"), "--summary-json", str(summary_path)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode in (0, 1) and summary_path.exists(), (
        f"the fuzzer did not run (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    summary = json.loads(summary_path.read_text())
    assert summary["cases"] == CASES
    # it reached conversions, not only the file checks: some mutants convert, most are refused
    assert summary["outcomes"].get("ok", 0) > 0 and summary["outcomes"].get("project_error", 0) > 0, summary["outcomes"]
    assert not summary["findings"], "\n".join(
        f"[{f['key'][0]}] {f['key'][1]} at {f['key'][2]}: {f.get('message', '')[:300]}\n    {f['mutations']}"
        for f in summary["findings"])
