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


def interpreted() -> bool:
    """Under Triton's interpreter (TRITON_INTERPRET=1: the kernels run on CPU tensors in numpy, for checking a
    kernel's arithmetic without a GPU), which runs no inline PTX."""
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def jit():
    """The module of Triton kernels (imports Triton)."""
    from . import _triton_jit

    return _triton_jit


# Launch woq_rows (the decode step's GEMVs) with programmatic dependent launch where the GPU has it: each loads
# its first weights while the kernel before it finishes (docs/gpu.md; benchmarks/gpu_decode.py's "+pdl"/"+nopdl").
# Read by the factories at load.
PDL = True


def pdl_enabled(device) -> bool:
    """PDL on a GPU with programmatic dependent launch (compute capability 9 or later) under a Triton that has it
    (`tl.extra.cuda.gdc_wait`), unless IPEXCONVERT_GPU_PDL=0."""
    import torch

    from ....environment import switched_off

    if not PDL or torch.device(device).type != "cuda" or switched_off("IPEXCONVERT_GPU_PDL"):
        return False
    try:
        from triton.language.extra import cuda
    except ImportError:
        return False
    return hasattr(cuda, "gdc_wait") and torch.cuda.get_device_capability(device)[0] >= 9
