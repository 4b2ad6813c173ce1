"""Conversion does not depend on the converting CPU: an artifact converted under an AVX2 cap has
the same graph as one converted without it, and loads here with this CPU's kernels (and the
other way round). Conversions run in subprocesses, since the libraries read their ISA caps once
per process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import ipexconvert
from ipexconvert.artifact import read_example_inputs, read_manifest
from ipexconvert.backends.cpu import compute_precision
from ipexconvert.backends.cpu.isa import ISA_LEVELS, selected_isa, supported_levels

CONVERT = """
import sys, ipexconvert
name, dtype, out = sys.argv[1:4]
extra = {"calib_synthetic": 4} if dtype == "int8" else {}
ipexconvert.optimize("example:" + name, dtype=dtype, output=out, **extra)
"""

pytestmark = pytest.mark.skipif("avx512" not in supported_levels(), reason="needs a CPU above AVX2 to compare with a cap")


def convert(tmp_path, name: str, dtype: str, cap: str | None):
    out = tmp_path / f"{name}.{dtype}.{cap or 'host'}.ipxc"
    env = {k: v for k, v in os.environ.items()
           if k not in ("IPEXCONVERT_MAX_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")}
    if cap:
        env["IPEXCONVERT_MAX_ISA"] = cap
    done = subprocess.run([sys.executable, "-c", CONVERT, name, dtype, str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def structure(path) -> list[tuple]:
    """The graph's ops, their value dtypes and shapes: what kernels are chosen from."""
    _, graph_json = read_manifest(path)
    graph = json.loads(graph_json)
    return [(n["op"], n.get("attrs", {}).get("target"), [graph["values"][v]["dtype"] for v in n["outputs"]])
            for n in graph["nodes"]]


@pytest.mark.parametrize("name, dtype", [("tiny-bert", "bf16"), ("tiny-cnn", "bf16"), ("tiny-cnn", "int8")])
def test_avx2_converted_artifact_is_the_same_and_runs_this_cpus_kernels(tmp_path, name, dtype):
    capped, host = convert(tmp_path, name, dtype, "avx2"), convert(tmp_path, name, dtype, None)
    if dtype == "int8":  # calibration runs float kernels of each level: scales may differ in the last bits
        assert structure(capped) == structure(host)
    else:
        assert read_manifest(capped)[1] == read_manifest(host)[1]  # the same graph, byte for byte
    model = ipexconvert.load_artifact(capped)  # this process's level (pytest itself may run capped)
    kernels = {s.kernel_name for s in model.executor.steps}
    best = selected_isa()
    if ISA_LEVELS.index(best) >= ISA_LEVELS.index("avx512_bf16"):  # widened where bf16 is no faster (Intel, no AMX)
        no_faster = compute_precision.bf16_no_faster_than_fp32(best)
        assert model.executor.bf16_compute == ("float32" if no_faster else "bfloat16")
    if dtype == "int8" and ISA_LEVELS.index(best) >= ISA_LEVELS.index("avx512_vnni"):
        assert not any(k.startswith("native:qconv2d") or k == "reference:qconv2d" for k in kernels), kernels
    inputs = read_example_inputs(capped)
    got = model.run_dict(inputs)
    want = ipexconvert.load_artifact(host).run_dict(inputs)
    for key in want:
        cosine = torch.nn.functional.cosine_similarity(got[key].float().flatten(), want[key].float().flatten(), dim=0)
        assert cosine > 0.999, (key, cosine)


def test_host_converted_artifact_runs_capped_to_avx2(tmp_path):
    host = convert(tmp_path, "tiny-cnn", "int8", None)
    check = f"""
import ipexconvert, torch
from ipexconvert.artifact import read_example_inputs
m = ipexconvert.load_artifact({str(host)!r})
kernels = {{s.kernel_name for s in m.executor.steps}}
assert "native:qconv2d@avx2" in kernels, kernels
m.run_dict(read_example_inputs({str(host)!r}))
print("ok")
"""
    env = dict(os.environ, IPEXCONVERT_MAX_ISA="avx2")
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
