"""CPU feature detection and the ISA level the runtime selects.

Levels, lowest to highest: generic, avx2, avx512, avx512_vnni, avx512_bf16, amx.
When the native extension is built, detection is its CPUID + XCR0 check (plus the Linux AMX
tile-data permission request), the same code that picks the kernels. Otherwise a Python
fallback reads the /proc/cpuinfo flags (which reflect OS support through XCR0) and asks for
the AMX permission with arch_prctl itself. IPEXCONVERT_MAX_ISA caps the selection.
"""
from __future__ import annotations

import ctypes
import os
import platform
from functools import lru_cache

from ... import environment
from ...errors import UserInputError
from ...target import CPU_LEVELS

ISA_LEVELS = list(CPU_LEVELS)

# Flags each level needs on top of the level below it.
_REQUIRED_FLAGS = {
    "generic": set(),
    "avx2": {"avx2", "fma"},
    "avx512": {"avx512f", "avx512bw", "avx512dq", "avx512vl"},
    "avx512_vnni": {"avx512_vnni"},
    "avx512_bf16": {"avx512_bf16"},
    "amx": {"amx_tile", "amx_bf16", "amx_int8"},
}

_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18
_SYS_ARCH_PRCTL = 158  # x86-64


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    return frozenset((_cpuinfo_field("flags") or "").split())


def _cpuinfo_field(name: str) -> str | None:
    """The first /proc/cpuinfo line named `name`, its value; None where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


@lru_cache(maxsize=1)
def cpu_model() -> str:
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


@lru_cache(maxsize=1)
def cpu_vendor() -> str:
    """CPUID's vendor string ("GenuineIntel", "AuthenticAMD", ...), "unknown" off Linux."""
    return _cpuinfo_field("vendor_id") or "unknown"


def amx_permission() -> bool:
    """Whether Linux granted this process AMX tile-data use (asked once, before AMX use)."""
    native = _native()
    if native is not None:
        return bool(native.cpu_features()["amx_permission"])
    return _python_amx_permission()


@lru_cache(maxsize=1)
def _python_amx_permission() -> bool:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def _native():
    """backends/cpu/native_lib when the extension is built, else None."""
    from . import native_lib as native

    return native if native.available() else None


def detection() -> str:
    """Which detector answers: "native" (CPUID/XCR0 in the extension) or "python" (/proc/cpuinfo)."""
    return "native" if _native() is not None else "python"


def supported_levels() -> list[str]:
    """Levels this CPU and OS can run, lowest first (a prefix of ISA_LEVELS)."""
    native = _native()
    if native is not None:
        return native.supported_levels()
    return python_supported_levels()


def python_supported_levels() -> list[str]:
    flags = cpu_flags()
    levels = ["generic"]
    for level in ISA_LEVELS[1:]:
        if not _REQUIRED_FLAGS[level] <= flags:
            break
        if level == "amx" and not _python_amx_permission():
            break
        levels.append(level)
    return levels


def max_isa_cap() -> str | None:
    cap = environment.get("IPEXCONVERT_MAX_ISA")
    if cap is None or cap == "":
        return None
    cap = cap.strip().lower()
    if cap not in ISA_LEVELS:
        raise UserInputError(f"IPEXCONVERT_MAX_ISA={cap!r} is not an ISA level", f"use one of: {', '.join(ISA_LEVELS)}")
    return cap


def selected_isa() -> str:
    """min(best supported, IPEXCONVERT_MAX_ISA); a bad cap raises UserInputError."""
    native = _native()
    if native is not None:
        return native.selected_level()
    best = python_supported_levels()[-1]
    cap = max_isa_cap()
    if cap is None:
        return best
    return ISA_LEVELS[min(ISA_LEVELS.index(best), ISA_LEVELS.index(cap))]
