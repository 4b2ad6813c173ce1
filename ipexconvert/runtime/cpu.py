"""CPU feature detection and the ISA level the runtime selects.

Levels, lowest to highest: generic, avx2, avx512, avx512_vnni, avx512_bf16, amx.
A level is supported when the CPU reports its instructions (Linux /proc/cpuinfo flags,
which already reflect OS support through XCR0) and, for AMX, when the kernel grants
tile-data permission (arch_prctl). IPEXCONVERT_MAX_ISA caps the selection.
"""
from __future__ import annotations

import ctypes
import os
import platform
from functools import lru_cache

from ..errors import UserInputError

ISA_LEVELS = ["generic", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx"]

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
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@lru_cache(maxsize=1)
def amx_permission() -> bool:
    """Ask Linux for AMX tile-data permission (needed once per process before AMX use)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def supported_levels() -> list[str]:
    flags = cpu_flags()
    levels = ["generic"]
    for level in ISA_LEVELS[1:]:
        if not _REQUIRED_FLAGS[level] <= flags:
            break
        if level == "amx" and not amx_permission():
            break
        levels.append(level)
    return levels


def max_isa_cap() -> str | None:
    cap = os.environ.get("IPEXCONVERT_MAX_ISA")
    if cap is None or cap == "":
        return None
    cap = cap.strip().lower()
    if cap not in ISA_LEVELS:
        raise UserInputError(f"IPEXCONVERT_MAX_ISA={cap!r} is not an ISA level", f"use one of: {', '.join(ISA_LEVELS)}")
    return cap


def selected_isa() -> str:
    """min(best supported, IPEXCONVERT_MAX_ISA)."""
    best = supported_levels()[-1]
    cap = max_isa_cap()
    if cap is None:
        return best
    return ISA_LEVELS[min(ISA_LEVELS.index(best), ISA_LEVELS.index(cap))]
