"""IPEXCONVERT_MAX_ISA caps torch's ATen kernels, torch's oneDNN and MKL too (ipexconvert/isa_caps.py),
so a capped run on a big CPU runs what a small one would. Each case is a fresh process: the
libraries read their switches once."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ipexconvert.backends.cpu import isa_caps
from ipexconvert.backends.cpu import isa as cpu

SWITCHES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")

# Runs a oneDNN convolution with verbose output on, and prints what each library says it runs.
PROBE = """
import json, os, torch
import ipexconvert
x, w = torch.randn(2, 32, 16, 16), torch.randn(32, 32, 3, 3)
with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
    torch.nn.functional.conv2d(x, w)
print(json.dumps({"aten": torch.backends.cpu.get_cpu_capability(),
                  "env": {k: os.environ.get(k) for k in %r}}))
""" % (SWITCHES,)


def run_probe(**env_overrides) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES and k != "IPEXCONVERT_MAX_ISA"}
    env.update(env_overrides)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


@pytest.mark.skipif("avx512" not in cpu.supported_levels(), reason="needs a CPU above AVX2 to show the cap")
def test_avx2_cap_reaches_aten_onednn_and_mkl():
    report, verbose = run_probe(IPEXCONVERT_MAX_ISA="avx2")
    assert report["aten"] == "AVX2"
    assert report["env"] == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    assert "isa:Intel AVX2" in verbose and "avx512" not in verbose  # oneDNN's own report of what it dispatched


@pytest.mark.skipif("avx512" not in cpu.supported_levels(), reason="needs a CPU above AVX2 to show the cap")
def test_uncapped_process_leaves_the_libraries_alone():
    report, verbose = run_probe()
    assert report["aten"] != "AVX2"
    assert all(v is None for v in report["env"].values())
    assert "isa:Intel AVX2" not in verbose


def test_a_switch_the_user_set_is_kept():
    report, _ = run_probe(IPEXCONVERT_MAX_ISA="avx2", ONEDNN_MAX_CPU_ISA="SSE41")
    assert report["env"]["ONEDNN_MAX_CPU_ISA"] == "SSE41"
    assert report["env"]["ATEN_CPU_CAPABILITY"] == "avx2"


def test_every_level_has_caps_and_only_amx_is_uncapped():
    assert set(isa_caps.LIBRARY_CAPS) == set(cpu.ISA_LEVELS)
    for level, caps in isa_caps.LIBRARY_CAPS.items():
        assert set(caps) == (set() if level == "amx" else set(SWITCHES)), level


def test_apply_on_a_plain_dict():
    environ = {"IPEXCONVERT_MAX_ISA": " AVX512 ", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    result = isa_caps.apply(environ)
    assert environ["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE" and environ["ATEN_CPU_CAPABILITY"] == "avx512"
    assert result["MKL_ENABLE_INSTRUCTIONS"] == ("user", "AVX2") and environ["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert isa_caps.apply({"IPEXCONVERT_MAX_ISA": "bogus"}) == {}  # runtime.cpu reports a bad cap


def test_a_cap_lifted_after_onednn_took_it_keeps_bf16_and_int8_off_onednn(monkeypatch):
    """oneDNN keeps the cap it took (ONEDNN_MAX_CPU_ISA at import, the direct layers' at first use): removing
    IPEXCONVERT_MAX_ISA later must not hand it bf16 or int8 layers it has no kernels for (a bf16 matmul at avx2
    failed to build; int8 without VNNI saturates)."""
    from ipexconvert.backends.cpu import onednn_direct
    from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed, isa_allows, onednn_level

    monkeypatch.setattr(isa_caps, "applied", {})
    monkeypatch.setattr(onednn_direct, "_isa_cap", None)
    assert onednn_level("amx") == "amx" and isa_allows("avx512_bf16", "bfloat16") and int8_allowed("avx512_vnni")

    monkeypatch.setattr(isa_caps, "applied", {"ONEDNN_MAX_CPU_ISA": ("set", "AVX2")})
    assert onednn_level("amx") == "avx2" and onednn_level("generic") == "generic"
    assert not isa_allows("avx512_bf16", "bfloat16") and isa_allows("avx512_bf16", "float32")
    assert not int8_allowed("amx")

    monkeypatch.setattr(isa_caps, "applied", {"ONEDNN_MAX_CPU_ISA": ("user", "AVX2")})  # the user's: not ours to read
    assert onednn_level("amx") == "amx"
    monkeypatch.setattr(onednn_direct, "_isa_cap", "avx512_core_vnni")  # the direct layers' own cap
    assert onednn_level("amx") == "avx512_vnni" and int8_allowed("amx") and not isa_allows("amx", "bfloat16")
