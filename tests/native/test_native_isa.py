"""Native ISA detection and level selection: CPUID/XCR0 levels, the cap, bad caps."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import native_ops as native
from ipexconvert.errors import UserInputError
from ipexconvert.backends.cpu import isa as cpu


def test_extension_is_built():
    """`pip install .` builds ipexconvert._native; without it every other native test skips."""
    assert native.available(), native.unavailable_reason()


needs_native = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")


@needs_native
def test_levels_are_a_prefix_of_the_level_list():
    assert native.levels() == cpu.ISA_LEVELS
    supported = native.supported_levels()
    assert supported[0] == "generic"
    assert supported == cpu.ISA_LEVELS[:len(supported)]


@needs_native
def test_native_detection_agrees_with_the_kernel_flags():
    """CPUID+XCR0 and Linux's /proc/cpuinfo flags (which also reflect XCR0) give the same levels."""
    if not os.path.exists("/proc/cpuinfo"):
        pytest.skip("no /proc/cpuinfo")
    assert native.supported_levels() == cpu.python_supported_levels()


@needs_native
def test_features_explain_the_levels():
    f = native.cpu_features()
    supported = native.supported_levels()
    if "avx2" in supported:
        assert f["avx2"] and f["fma"] and f["os_ymm"]
    if "avx512" in supported:
        assert f["avx512f"] and f["avx512bw"] and f["avx512dq"] and f["avx512vl"] and f["os_zmm"]
        assert f["xcr0"] & 0xE6 == 0xE6
    if "amx" in supported:
        assert f["amx_tile"] and f["os_tiles"] and f["amx_permission"]


@needs_native
def test_cap_selects_the_minimum(monkeypatch):
    monkeypatch.delenv("IPEXCONVERT_MAX_ISA", raising=False)
    supported = native.supported_levels()
    best = supported[-1]
    assert native.selected_level() == best
    for cap in cpu.ISA_LEVELS:
        want = cap if cap in supported else best
        assert native.selected_level(cap) == want
    assert native.selected_level(" AVX2 ") == min("avx2", best, key=cpu.ISA_LEVELS.index)  # case, spaces


@needs_native
def test_explicit_cap_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "generic")
    assert native.selected_level() == "generic"
    assert cpu.selected_isa() == "generic"
    assert native.selected_level(native.supported_levels()[-1]) == native.supported_levels()[-1]


@needs_native
@pytest.mark.parametrize("where", ["argument", "environment"])
def test_bogus_cap_is_a_clear_error(monkeypatch, where):
    if where == "argument":
        with pytest.raises(UserInputError) as err:
            native.selected_level("avx9000")
        assert "the ISA cap='avx9000' is not an ISA level" in err.value.problem
    else:
        monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "avx9000")
        with pytest.raises(UserInputError) as err:
            native.selected_level()
        assert "IPEXCONVERT_MAX_ISA='avx9000' is not an ISA level" in err.value.problem
    for level in cpu.ISA_LEVELS:
        assert level in err.value.fix
    with pytest.raises(UserInputError):
        native.silu(torch.ones(3), max_isa="avx9000")


@needs_native
def test_kernel_level_falls_back_to_a_lower_build():
    for name in native.kernel_names():
        built = native.kernel_levels(name)
        if name == "attention":  # vdpbf16ps or AMX products: nothing below avx512_bf16
            assert built in (["avx512_bf16", "amx"], ["avx512_bf16"], []), built  # a compiler may reject -mamx-*
            assert native.kernel_level(name, "avx512_vnni") == "none"
            continue
        if name == "attention_f32":  # fp32 FMA products over V16: avx2 and avx512 builds, none at generic
            assert built == ["avx2", "avx512"], built
            assert native.kernel_level(name, "generic") == "none"
            if "avx512_bf16" in native.supported_levels():
                assert native.kernel_level(name, "avx512_bf16") == "avx512"
            continue
        if name == "int8_gemm":  # exact int8 without VNNI: AVX2 up (from VNNI up oneDNN's int8 runs instead)
            assert built == ["avx2"], built
            assert native.kernel_level(name, "generic") == "none"
            if "avx512" in native.supported_levels():
                assert native.kernel_level(name, "avx512") == "avx2"
            continue
        if name == "woq_gemv_i8":  # woq_gemm's path 3 (int8 activations, vpmaddubsw): AVX2 up
            assert built == ["avx2"], built
            assert native.kernel_level(name, "generic") == "none"
            continue
        if name == "woq_gemm_w8a8":  # woq_gemm's path 4 (sign trick on AVX2, vpdpbusd from VNNI up, AMX tiles)
            assert built in (["avx2", "avx512_vnni", "amx"], ["avx2", "avx512_vnni"]), built  # (-mamx-* may be rejected)
            if "avx512_bf16" in native.supported_levels():
                assert native.kernel_level(name, "avx512_bf16") == "avx512_vnni"
            assert native.kernel_level(name, "generic") == "none"
            if "avx512" in native.supported_levels():
                assert native.kernel_level(name, "avx512") == "avx2"
            continue
        if name in ("bf16_amx_gemm", "int8_amx_gemm"):  # AMX tiles only (linear of a few hundred rows); nothing below
            assert built in (["amx"], []), built  # (-mamx-* may be rejected)
            assert native.kernel_level(name, "avx512_bf16") == "none"
            continue
        if name == "woq_gemm_w4a8":  # woq_gemm's path 5 (vpdpbusd, AMX tiles): nothing below avx512_vnni
            assert built in (["avx512_vnni", "amx"], ["avx512_vnni"]), built
            assert native.kernel_level(name, "avx512") == "none"
            continue
        assert built and built[0] == "generic", name
        assert native.kernel_level(name, "generic") == "generic"
    # The other kernels have no avx512_vnni build: that level runs the avx512 one.
    if "avx512_vnni" in native.supported_levels():
        assert native.kernel_level("gelu", "avx512_vnni") == "avx512"
    with pytest.raises(ValueError, match="no native kernel named 'nope'"):
        native.kernel_level("nope")


@needs_native
@pytest.mark.parametrize("cap", ["generic", "avx2"])
def test_environment_cap_in_a_fresh_process(cap):
    """IPEXCONVERT_MAX_ISA is read by the native library itself, in a new process."""
    if cap not in native.supported_levels():
        pytest.skip(f"this CPU cannot run {cap}")
    code = (f"import json, sys, torch; sys.path.insert(0, {str(Path(__file__).parent)!r}); import native_ops as native; "
            "from ipexconvert.backends.cpu import isa as cpu; "
            "x = torch.randn(4, 33); y = native.layer_norm(x); "
            "print(json.dumps([native.selected_level(), cpu.selected_isa(), native.kernel_level('layer_norm'), "
            "float((y - torch.nn.functional.layer_norm(x, [33])).abs().max())]))")
    env = dict(os.environ, IPEXCONVERT_MAX_ISA=cap)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    selected, runtime, kernel, err = json.loads(out.strip().splitlines()[-1])
    assert selected == runtime == kernel == cap
    assert err < 1e-5
