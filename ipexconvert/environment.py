"""Every environment variable ipexconvert reads, in one place.

Environment variables are overrides of process-wide runtime choices (which kernels may run, the ISA
cap, allocator tuning, limits) for debugging, benchmarking and capping a big CPU to a small one's
behaviour; conversion settings live in ConversionConfig (config.py), and a kernel preference for one
model is a field: `load_artifact(path, avoid_kernels=[...])`, `bench --avoid-kernel`, the config's
`avoid_kernels`. Code reads a variable only
through `get()`, which refuses a name not listed here, so this table is complete
(tests/test_environment.py also greps the sources). docs/configuration.md is generated from it.
Imports nothing heavy: isa_caps reads the cap through it before torch loads.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

_OFF = ("0", "false", "off", "no")


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    effect: str


VARIABLES: dict[str, Variable] = {v.name: v for v in [
    Variable("IPEXCONVERT_MAX_ISA", "unset (the best level the CPU has)",
             "cap the ISA level (generic, avx2, avx512, avx512_vnni, avx512_bf16, amx) of our kernels and, through "
             "ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA and MKL_ENABLE_INSTRUCTIONS (unless set), of torch, oneDNN and MKL: "
             "a big CPU runs what a smaller one would. Read by the native library too."),
    Variable("IPEXCONVERT_ONEDNN", "1", "0: no oneDNN- or MKL-backed kernel and no int8 GEMM runs (the op references "
             "and our float kernels do); for debugging and for timing against the references"),
    Variable("IPEXCONVERT_ONEDNN_DIRECT", "1", "0: our direct oneDNN layers (`onednn_direct_*` kernels, ipexconvert._dnnl) "
             "step aside and torch's oneDNN operators run those nodes"),
    Variable("IPEXCONVERT_ROW_CHUNKS", "1", "0: oneDNN's bf16 linear always runs whole, never in the 256-row calls that the "
             "first call of a layer shape in a range of row counts (512 rows or more, a power of two to the next) may measure faster"),
    Variable("IPEXCONVERT_AMX_GEMM", "1", "bf16 and int8 linear layers on AMX, up to 1024 rows: 1 each layer's first calls "
             "in the model measure our tile GEMM (bf16_amx_gemm, int8_amx_gemm: its weight streamed from memory once a "
             "call) against oneDNN's matmul and keep the faster; always: ours without measuring; 0: oneDNN's"),
    Variable("IPEXCONVERT_MKL_FP32", "unset (MKL on Intel CPUs, oneDNN elsewhere)",
             "1/0: float32 linear on MKL's packed GEMM / on oneDNN, whatever the CPU vendor"),
    Variable("IPEXCONVERT_PIN_THREADS", "1", "0: a model's calls leave the calling thread and its OpenMP workers where "
             "the scheduler puts them (by default, when the threads equal the process's CPUs, the caller is bound to the "
             "first CPU and the workers to the others while a call runs: backends/cpu/thread_placement.py)"),
    Variable("IPEXCONVERT_FIXED_PLANS", "1", "0: a model called again and again with the same input shapes runs each "
             "call step by step through the executor instead of from a plan bound to buffers made once, whose "
             "consecutive native calls run as one (runtime/bound_plan.py)"),
    Variable("IPEXCONVERT_MALLOC_TUNING", "1", "0: loading an artifact leaves glibc's malloc thresholds alone"),
    Variable("IPEXCONVERT_MAX_TENSOR_BYTES", "2147483648 (2 GiB)",
             "the largest output an `aten` fallback node may make (a bound on what an artifact can ask for)"),
    Variable("IPEXCONVERT_GPU_PDL", "1", "0: the GPU's weight-only GEMVs (a decode step's) launch one after another "
             "instead of with programmatic dependent launch (Hopper and later: each starts loading its weights while "
             "the kernel before it finishes)"),
    Variable("IPEXCONVERT_DEBUG", "unset", "1: an internal error (exit 3) prints its Python traceback"),
]}


def get(name: str, environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """The variable's value, None when unset or empty. Only listed variables may be read."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not listed in ipexconvert/environment.py")
    value = environ.get(name)
    return value if value else None


def switched_off(name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """An on/off switch (default on) set to 0, false, off or no."""
    value = get(name, environ)
    return value is not None and value.strip().lower() in _OFF
