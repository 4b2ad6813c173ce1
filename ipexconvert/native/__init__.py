"""Torch-facing wrapper of the native kernel library `ipexconvert._native`.

The extension is built from `native/` (C++17, one build per ISA level, see docs/native.md).
Every kernel computes in fp32 and takes float32 or bfloat16 tensors that are contiguous and on
the CPU; norm weights/biases are converted to float32. Each kernel function takes
  max_isa: cap the ISA level for this call (default: IPEXCONVERT_MAX_ISA, else the best the
           CPU supports); the kernel runs its build for the highest level <= that;
  threads: threads to use (default: torch.get_num_threads(), so torch's setting is respected).
When the extension is missing, `available()` is False and the kernels raise RuntimeError.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import UserInputError

try:
    from .. import _native as raw  # the nanobind module; runtime kernels call it directly
    _IMPORT_ERROR: Optional[str] = None
except ImportError as e:  # not built (e.g. a source checkout without `pip install -e .`)
    raw = None
    _IMPORT_ERROR = str(e)

KERNELS = ("layer_norm", "rms_norm", "softmax", "gelu", "silu", "silu_mul")


def available() -> bool:
    return raw is not None


def unavailable_reason() -> Optional[str]:
    return _IMPORT_ERROR


def _lib():
    if raw is None:
        raise RuntimeError(f"ipexconvert._native is not built ({_IMPORT_ERROR}); "
                           "reinstall with `pip install -e .` (see docs/native.md)")
    return raw


def _run(fn, *args):
    """Calls into _native; a bad ISA cap (ValueError "<what>='x' is not an ISA level; use one of:
    ...") becomes a UserInputError, other errors pass through."""
    try:
        return fn(*args)
    except ValueError as e:
        if "is not an ISA level" not in str(e):
            raise
        problem, _, fix = str(e).partition("; ")
        raise UserInputError(problem, fix or None) from None


def levels() -> list[str]:
    """All ISA levels, lowest first."""
    return _lib().levels()


def supported_levels() -> list[str]:
    """Levels this CPU and OS can run (CPUID, XCR0, AMX permission), lowest first."""
    return _lib().supported_levels()


def selected_level(max_isa: Optional[str] = None) -> str:
    """min(best supported, max_isa); max_isa None means IPEXCONVERT_MAX_ISA (unset: no cap)."""
    return _run(_lib().selected_level, max_isa)


def cpu_features() -> dict:
    return _lib().cpu_features()


def kernel_levels(name: str) -> list[str]:
    """The levels kernel `name` was compiled for."""
    return _lib().kernel_levels(name)


def kernel_level(name: str, max_isa: Optional[str] = None) -> str:
    """The level kernel `name` runs at under max_isa (falling back to the highest lower build)."""
    return _run(_lib().kernel_level, name, max_isa)


# ---- kernels --------------------------------------------------------------------------------

def _tensor(t, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def _param(t: Optional[torch.Tensor], name: str) -> Optional[torch.Tensor]:
    """Norm weights and biases go to the kernel as contiguous float32."""
    if t is None:
        return None
    return _tensor(t, name).to(torch.float32).contiguous()


def _threads(threads: Optional[int]) -> int:
    return torch.get_num_threads() if threads is None else int(threads)


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5, residual: Optional[torch.Tensor] = None, *, return_sum: bool = False,
               max_isa: Optional[str] = None, threads: Optional[int] = None):
    """layer_norm over the last dim of x (+ residual). With return_sum, returns (y, x + residual)."""
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    total = torch.empty_like(x) if return_sum and residual is not None else None
    _run(lib.layer_norm, x, residual, _param(weight, "weight"), _param(bias, "bias"), float(eps), out, total,
         max_isa, _threads(threads))
    if return_sum:
        return out, (total if total is not None else x)
    return out


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: Optional[float] = None,
             residual: Optional[torch.Tensor] = None, *, return_sum: bool = False, max_isa: Optional[str] = None,
             threads: Optional[int] = None):
    """rms_norm over the last dim of x (+ residual); eps None means float32's machine epsilon (as torch)."""
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    total = torch.empty_like(x) if return_sum and residual is not None else None
    eps = torch.finfo(torch.float32).eps if eps is None else float(eps)
    _run(lib.rms_norm, x, residual, _param(weight, "weight"), eps, out, total, max_isa, _threads(threads))
    if return_sum:
        return out, (total if total is not None else x)
    return out


def softmax(x: torch.Tensor, dim: int = -1, *, scale: float = 1.0, mask: Optional[torch.Tensor] = None,
            max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """softmax(x * scale + mask) over the last dim; mask broadcasts to x (e.g. [batch, 1, 1, keys])."""
    lib = _lib()
    x = _tensor(x, "x")
    if dim not in (-1, x.dim() - 1):
        raise ValueError(f"native softmax works over the last dim only (got dim={dim} for {x.dim()} dims)")
    if mask is not None:
        mask = _tensor(mask, "mask")
        if mask.dim() > x.dim():
            raise ValueError(f"mask {list(mask.shape)} has more dims than x {list(x.shape)}")
        mask = mask.reshape((1,) * (x.dim() - mask.dim()) + tuple(mask.shape))  # same rank as x, strides kept
        if mask.shape[-1] != x.shape[-1] or (mask.shape[-1] > 1 and mask.stride(-1) != 1):
            mask = mask.expand(*mask.shape[:-1], x.shape[-1]).contiguous()
    out = torch.empty_like(x)
    _run(lib.softmax, x, float(scale), mask, out, max_isa, _threads(threads))
    return out


def gelu(x: torch.Tensor, approximate: str = "none", *, max_isa: Optional[str] = None,
         threads: Optional[int] = None) -> torch.Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    _run(lib.gelu, x, approximate == "tanh", out, max_isa, _threads(threads))
    return out


def silu(x: torch.Tensor, *, max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    _run(lib.silu, x, out, max_isa, _threads(threads))
    return out


def silu_mul(a: torch.Tensor, b: torch.Tensor, *, max_isa: Optional[str] = None,
             threads: Optional[int] = None) -> torch.Tensor:
    """silu(a) * b in one pass (SwiGLU gate); a and b have the same shape and dtype."""
    lib = _lib()
    a, b = _tensor(a, "a"), _tensor(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a {list(a.shape)} and b {list(b.shape)} must have the same shape")
    out = torch.empty_like(a)
    _run(lib.silu_mul, a, b, out, max_isa, _threads(threads))
    return out
