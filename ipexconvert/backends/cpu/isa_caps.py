"""IPEXCONVERT_MAX_ISA caps the libraries we drive, not only our own kernels.

Our kernels, torch's vectorised ATen kernels, the oneDNN inside torch (and the oneDNN wheel the
direct layers use) and MKL each pick their code from CPUID on their own. A cap that stopped at
our kernels would leave AVX-512 and AMX code running below it, so capping a big CPU to "avx2"
would not reproduce what an AVX2 CPU runs. So at `import ipexconvert` the cap is written into
each library's own switch, unless the user already set that switch:

- ATEN_CPU_CAPABILITY (torch reads it on the first vectorised kernel call),
- ONEDNN_MAX_CPU_ISA (oneDNN reads it when it creates its first primitive),
- MKL_ENABLE_INSTRUCTIONS (MKL reads it on its first call).

All three are read lazily, so this works even when torch was imported first, as long as no
kernel ran before `import ipexconvert`. `ipexconvert doctor` reports what each library runs.
This module imports nothing heavy: it must run before torch does any work.
"""
from __future__ import annotations

import os
from typing import Optional

from ... import environment

# Our level -> each library's name for the same ceiling. "amx" is the top: nothing to cap.
LIBRARY_CAPS: dict[str, dict[str, str]] = {
    "generic": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
    "avx512_vnni": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
    "avx512_bf16": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
    "amx": {},
}

# What apply() did at import: variable -> ("set" | "user", value). Read by doctor.
applied: dict[str, tuple[str, str]] = {}


def apply(environ=os.environ) -> dict[str, tuple[str, str]]:
    """Write the cap into the libraries' variables the user left unset; returns what each holds."""
    cap = (environment.get("IPEXCONVERT_MAX_ISA", environ) or "").strip().lower()
    result: dict[str, tuple[str, str]] = {}
    for variable, value in LIBRARY_CAPS.get(cap, {}).items():  # an unknown cap is reported later, by runtime.cpu
        if environ.get(variable):
            result[variable] = ("user", environ[variable])
        else:
            environ[variable] = value
            result[variable] = ("set", value)
    return result


applied.update(apply())


def capped_level(variable: str) -> Optional[str]:
    """The level whose cap apply() wrote into a library's variable at import (None where it wrote none: no cap, or
    the user's own value, which is theirs to keep consistent)."""
    kind, value = applied.get(variable, ("", ""))
    if kind != "set":
        return None
    return next((level for level, names in LIBRARY_CAPS.items() if names.get(variable) == value), None)
