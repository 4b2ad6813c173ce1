"""Triton for the GPU kernels: whether it is here, and its kernels (_triton_jit.py) imported on first use.
CI imports the kernel package without a GPU or Triton; the factories' `runs_at` says why they cannot run."""
from __future__ import annotations

import functools
from typing import Optional


def triton_missing(_level: str) -> Optional[str]:
    """Where Triton is installed (it comes with torch's CUDA builds)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    return None


def pdl(device) -> dict:
    """Launch arguments for a kernel that takes part in programmatic dependent launch (Hopper and later): it may
    start while the kernel before it finishes, reads only constants (weights) until `pdl_wait` (which waits for
    that kernel to complete and its writes to be visible) and writes nothing before it; it lets the next kernel
    start early with `pdl_launch_next`. Captured in a CUDA graph as such edges. {"PDL": False} elsewhere (Triton's
    interpreter on CPU tensors, older GPUs, IPEXCONVERT_GPU_PDL=0)."""
    return _pdl_on(device.index if device.index is not None else -1) if device.type == "cuda" else {"PDL": False}


@functools.cache
def _pdl_on(index: int) -> dict:
    import torch

    from .... import environment
    try:
        from triton.language.extra.cuda import gdc_wait  # noqa: F401  (Triton 3.3 and later)
    except ImportError:
        return {"PDL": False}
    major, _ = torch.cuda.get_device_capability(index if index >= 0 else None)
    if major < 9 or environment.switched_off("IPEXCONVERT_GPU_PDL"):
        return {"PDL": False}
    return {"PDL": True, "launch_pdl": True}


@functools.cache
def jit():
    """The module of Triton kernels (imports Triton)."""
    from . import _triton_jit

    return _triton_jit
