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


@functools.cache
def jit():
    """The module of Triton kernels (imports Triton)."""
    from . import _triton_jit

    return _triton_jit
