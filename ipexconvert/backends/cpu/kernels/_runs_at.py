"""Where each kernel family can run at all (runtime/kernels.py `runs_at`): None, or why not. The factories
still decline single nodes they do not cover (dtype, layout, post-ops); these rules are per process and
ISA level, and `ipexconvert doctor --kernels` prints them."""
from __future__ import annotations

from typing import Optional

from .... import environment
from .. import native_lib, onednn_direct
from ..isa import ISA_LEVELS
from ..self_check import torch_ops
from ._torch_onednn import enabled, int8_allowed, mkl_runs_float32_linear


def _below(level: str, needed: str) -> bool:
    return ISA_LEVELS.index(level) < ISA_LEVELS.index(needed)


def native(level: str) -> Optional[str]:
    """Our native kernels: wherever ipexconvert._native is built (every kernel has a generic build)."""
    if not native_lib.available():
        return f"ipexconvert._native is not built ({native_lib.unavailable_reason()})"
    return None


def native_kernel(*names: str):
    """Our kernels that exist only from some level up (attention): one of `names` has a build here."""
    def runs_at(level: str) -> Optional[str]:
        if native(level) is not None:
            return native(level)
        if all(native_lib.kernel_level(name, level) == "none" for name in names):
            return f"{' / '.join(names)} has no build at or below {level}"
        return None
    runs_at.__doc__ = (f"Our native {' or '.join(names)} kernel: built, from the lowest level it has a build for "
                       "(`doctor` lists the builds)")
    return runs_at


def native_bf16_storage(level: str) -> Optional[str]:
    """Our bf16 linear from bf16 storage (bf16_gemv / bf16_gemm): built, and below avx512_bf16, where nothing
    computes bf16 natively (above it oneDNN's bf16 linear runs)."""
    if native(level) is not None:
        return native(level)
    if not _below(level, "avx512_bf16"):
        return f"at {level} bf16 arithmetic is native: oneDNN's bf16 linear runs instead"
    return None


def native_int8_gemm(level: str) -> Optional[str]:
    """Our exact int8 GEMM: from avx2 up to where oneDNN's int8 takes over (VNNI)."""
    if native(level) is not None:
        return native(level)
    if not enabled():
        return "switched off by IPEXCONVERT_ONEDNN=0"
    if _below(level, "avx2"):
        return "needs avx2"
    if int8_allowed(level):
        return f"at {level} oneDNN's int8 kernels run instead (VNNI)"
    return None


def onednn_direct_float(level: str) -> Optional[str]:
    """Our oneDNN primitives (ipexconvert._dnnl): loaded, switched on, avx2 or above, self-check passed."""
    if not onednn_direct.available():
        return f"ipexconvert._dnnl is not loaded ({onednn_direct.unavailable_reason()})"
    if not enabled():
        return "switched off by IPEXCONVERT_ONEDNN=0"
    if not onednn_direct.enabled():
        return "switched off by IPEXCONVERT_ONEDNN_DIRECT=0"
    if _below(level, "avx2"):
        return "needs avx2"
    if not onednn_direct.usable(level):
        return f"failed its self-check ({onednn_direct.report().get('error')})"
    return None


def onednn_direct_int8(level: str) -> Optional[str]:
    """Our oneDNN int8 primitives: as the float ones, from avx512_vnni up (below, u8*s8 products saturate)."""
    if not int8_allowed(level):
        return f"oneDNN int8 needs avx512_vnni ({level} here: its u8*s8 products would saturate)"
    return onednn_direct_float(level)


def native_amx_linear(level: str) -> Optional[str]:
    """Our bf16 linear on AMX tiles (bf16_amx_gemm): built, at the amx level, switched on (IPEXCONVERT_AMX_GEMM)."""
    why = native_kernel("bf16_amx_gemm")(level)
    if why is None and environment.switched_off("IPEXCONVERT_AMX_GEMM"):
        return "switched off by IPEXCONVERT_AMX_GEMM=0"
    return why


def amx_gemm_always() -> bool:
    """IPEXCONVERT_AMX_GEMM=always: our AMX tile GEMMs run their layers without measuring them against oneDNN's."""
    return (environment.get("IPEXCONVERT_AMX_GEMM") or "").strip().lower() == "always"


def native_amx_int8_linear(level: str) -> Optional[str]:
    """Our int8 linear on AMX tiles (int8_amx_gemm), beside our oneDNN int8 matmul it measures itself against:
    built, at the amx level, switched on (IPEXCONVERT_AMX_GEMM), our oneDNN primitives usable."""
    why = native_kernel("int8_amx_gemm")(level) or onednn_direct_int8(level)
    if why is None and environment.switched_off("IPEXCONVERT_AMX_GEMM"):
        return "switched off by IPEXCONVERT_AMX_GEMM=0"
    return why


def onednn_direct_float_linear(level: str) -> Optional[str]:
    """Our oneDNN matmul for float linear layers: as the other direct layers, at the avx512_bf16 level only (bf16
    arithmetic without AMX; on AMX torch's newer bundled oneDNN ran BERT-base's bf16 GEMMs faster, and elsewhere it
    was not measured: docs/native.md, "Direct oneDNN layers"), and only where MKL does not run float32 linear (the
    factory would decline every layer there: float32 runs on MKL, bf16 widens to it)."""
    why = onednn_direct_float(level)
    if why is None and level != "avx512_bf16":
        return f"measured for avx512_bf16 only ({level} here: torch's oneDNN linear runs)"
    if why is None and mkl_runs_float32_linear():
        return ("MKL runs float32 linear on this CPU and bf16 widens to it for many rows (torch's oneDNN linear "
                "keeps both)")
    return why


def torch_onednn_float(level: str) -> Optional[str]:
    """torch's oneDNN operators: switched on, avx2 or above (each op's self-check is per dtype, in the factory)."""
    if not enabled():
        return "switched off by IPEXCONVERT_ONEDNN=0"
    if _below(level, "avx2"):
        return "needs avx2"
    return None


def torch_onednn_linear(level: str) -> Optional[str]:
    """torch's oneDNN linear: for bfloat16 where the CPU computes it natively (avx512_bf16 up), for float32
    where MKL does not run it (other vendors' CPUs, or IPEXCONVERT_MKL_FP32=0)."""
    why = torch_onednn_float(level)
    if why is None and _below(level, "avx512_bf16") and mkl_runs_float32_linear():
        return f"bf16 needs avx512_bf16 ({level} here) and float32 linear runs on MKL on this CPU"
    return why


def torch_onednn_int8(level: str) -> Optional[str]:
    """torch's oneDNN int8 operators: switched on, from avx512_vnni up (below, u8*s8 products saturate)."""
    if not int8_allowed(level):
        return f"oneDNN int8 needs avx512_vnni ({level} here: its u8*s8 products would saturate)"
    return torch_onednn_float(level)


def torch_mkl(level: str) -> Optional[str]:
    """MKL's packed float32 GEMM through torch: Intel CPUs (IPEXCONVERT_MKL_FP32 overrides), self-check passed."""
    if not enabled():
        return "switched off by IPEXCONVERT_ONEDNN=0"
    if not mkl_runs_float32_linear():
        return "oneDNN runs float32 linear on this vendor's CPUs (IPEXCONVERT_MKL_FP32=1 forces MKL)"
    if torch_ops.op_for("mkl._mkl_linear", "float32") is None:
        return "torch's mkl._mkl_linear failed its self-check"
    return None
