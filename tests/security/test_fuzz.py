"""The artifact fuzzer (fuzz/fuzz_artifact.py), a short run in CI: `pytest -k fuzz tests/security`.

It mutates the tiny example artifacts (manifest, graph, tensors, container; mostly re-hashed so the
deeper checks are reached) and loads, runs and inspects each one in a forked child. It must find no
crash, hang, out-of-memory, non-ipexconvert exception or code execution. The run is deterministic for a
given seed and tree; IPEXCONVERT_FUZZ_SECONDS / IPEXCONVERT_FUZZ_SEED change its length and seed (the
security issue's bar is a 10-minute run: `python fuzz/fuzz_artifact.py --seconds 600`).

The seed artifacts are cached in pytest's cache folder (made on the first run, about 1.5 minutes).
"""
from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ipexconvert.errors import ArtifactError

REPO = Path(__file__).resolve().parents[2]
FUZZER = REPO / "fuzz" / "fuzz_artifact.py"
SECONDS = float(os.environ.get("IPEXCONVERT_FUZZ_SECONDS", "60"))
SEED = int(os.environ.get("IPEXCONVERT_FUZZ_SEED", "1"))


def _describe(summary: dict) -> str:
    lines = [f"{summary['cases']} cases, outcomes {summary['outcomes']}"]
    for f in summary["findings"]:
        kind, what, where = f["key"]
        lines.append(f"[{kind}] {what} at {where} (stage {f.get('stage')}, x{f['count']}): {f.get('message', '')[:200]}")
        lines.append(f"    mutations: {'; '.join(f.get('mutations') or [])[:400]}")
        lines.append(f"    reproduce: python {f.get('folder')}/repro.py")
    return "\n".join(lines)


@pytest.mark.slow
def test_fuzz_artifact_reader_and_executor(tmp_path, request):
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    seeds_dir = cache.mkdir("ipexconvert-fuzz-seeds") if cache is not None else tmp_path / "seeds"
    summary_path = tmp_path / "summary.json"
    cmd = [sys.executable, str(FUZZER), "--seconds", str(SECONDS), "--seed", str(SEED), "--out", str(tmp_path / "findings"),
           "--seeds-dir", str(seeds_dir), "--summary-json", str(summary_path)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=SECONDS + 900)
    assert done.returncode in (0, 1) and summary_path.exists(), (
        f"the fuzzer did not run (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    summary = json.loads(summary_path.read_text())
    # it fuzzed for real: enough cases, and most re-hashed mutants got past the integrity checks
    assert summary["cases"] >= SECONDS / 4, _describe(summary)
    integrity = summary["integrity"]
    deep = integrity.get("re-hashed: past the hash checks", 0)
    assert deep > 4 * integrity.get("re-hashed: stopped by a hash check", 0), (
        f"re-hashed mutants are stopped by the hash checks ({integrity}): the fuzzer's re-hashing no longer matches "
        "ipexconvert/artifact.py")
    assert not summary["findings"], (
        f"the fuzzer found {len(summary['findings'])} problem(s); each finding folder holds the artifact, "
        f"case.json and repro.py\n{_describe(summary)}")


# ---- the fuzzer's own machinery: quick checks that it sees what it claims to ---------------------------------------


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(REPO / "fuzz"))
    try:
        import harness as module
        yield module
    finally:
        sys.path.remove(str(REPO / "fuzz"))


def _project_error(ctx):
    raise ArtifactError("refused", "fix")


def _key_error(ctx):
    return {}["missing"]


def _allocate(ctx):
    bytearray(2 << 30)


def _segfault(ctx):
    os.kill(os.getpid(), signal.SIGSEGV)


def _sleep(ctx):
    time.sleep(60)


def _shell(ctx):
    os.system("true")


def _marker(ctx):
    open("IPXFUZZ_MARKER", "w").close()


def _eval_payload(ctx):
    eval("IPXFUZZ_payload + 1")


def _parse_payload(ctx):
    ast.parse("IPXFUZZ_payload + 1")  # a parse only: not code execution


@pytest.mark.parametrize("stage, outcome", [
    (lambda ctx: None, "ok"), (_project_error, "project_error"), (_key_error, "nonproject"), (_allocate, "oom"),
    (_segfault, "crash"), (_sleep, "hang"), (_shell, "code_exec"), (_marker, "code_exec"), (_eval_payload, "code_exec"),
    (_parse_payload, "ok"),
])
def test_fuzz_harness_classifies_outcomes(harness, monkeypatch, tmp_path, stage, outcome):
    monkeypatch.setitem(harness.STAGES, "probe", stage)
    result = harness.execute(tmp_path / "unused.ipxc", {}, 0, harness.Limits(timeout=4, mem_bytes=512 << 20), ["probe"])
    assert result["outcome"] == outcome, result
    assert bool(result["findings"]) == (outcome in harness.FAILING), result


def test_fuzz_rewriter_matches_the_hash_scheme(tiny_cnn_artifact, tmp_path):
    """The fuzzer's writer re-hashes with artifact.py's functions: a re-hashed edit passes the integrity check
    (and is refused by a deeper one), the same edit without re-hashing is refused as modified."""
    sys.path.insert(0, str(REPO / "fuzz"))
    try:
        from parts import Parts
    finally:
        sys.path.remove(str(REPO / "fuzz"))
    import ipexconvert

    seed = Parts.read(tiny_cnn_artifact.read_bytes())
    same = tmp_path / "same.ipxc"
    same.write_bytes(seed.copy().build())
    ipexconvert.load_artifact(same)
    for rehash in (True, False):
        parts = seed.copy()
        parts.rehash = rehash
        parts.graph["nodes"].reverse()
        path = tmp_path / f"edited-{rehash}.ipxc"
        path.write_bytes(parts.build())
        with pytest.raises(ArtifactError) as e:
            ipexconvert.load_artifact(path)
        assert ("hash" in e.value.problem) != rehash, e.value.problem
