"""One Triton kernel for layer_norm and add_layer_norm on the GPU: a row per program, the residual sum
(rounded to the activations' dtype, as the reference's `x + r` is) optionally written out, then the norm
in float32 and one rounding to the activations' dtype, then optionally the codes of the result for the
int8 layer after it (the quantize arithmetic of _triton_int8.py). One kernel where torch needs two (add,
norm), and the reference a dozen with the quantize.

Triton is imported on first use: CI imports this package without a GPU or Triton (`runs_at` says why
the factories cannot run there)."""
from __future__ import annotations

import functools
from typing import Optional

import torch

MAX_COLUMNS = 16384  # one row per program, held in registers: wider rows run torch's kernels


def triton_missing(_level: str) -> Optional[str]:
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    return None


triton_missing.__doc__ = "Where Triton is installed (it comes with torch's CUDA builds)."


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def add_layer_norm_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, sum_ptr, m_ptr, q_ptr, columns, eps,
                            inv_scale, zero_point, lo, hi,
                            HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                            WRITE_SUM: tl.constexpr, QUANTIZE: tl.constexpr, HAS_MULTIPLIER: tl.constexpr,
                            BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < columns
        offsets = row * columns + cols
        x = tl.load(x_ptr + offsets, mask=inside, other=0.0)
        if HAS_RESIDUAL:
            total = x + tl.load(r_ptr + offsets, mask=inside, other=0.0)  # in the activations' dtype
            if WRITE_SUM:
                tl.store(sum_ptr + offsets, total, mask=inside)
        else:
            total = x
        v = total.to(tl.float32)
        mean = tl.sum(v, axis=0) / columns
        centered = tl.where(inside, v - mean, 0.0)
        variance = tl.sum(centered * centered, axis=0) / columns
        y = centered * (1.0 / tl.sqrt(variance + eps))
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        y = y.to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + offsets, y, mask=inside)
        if QUANTIZE:  # the codes of y as stored (rounded to the activations' dtype), as the reference
            v = y.to(tl.float32)
            if HAS_MULTIPLIER:
                v = (v * tl.load(m_ptr + cols, mask=inside, other=0.0)).to(tl.float64)
                r = tl.floor(v + 0.5)
                v = tl.where((r - v == 0.5) & (r - 2.0 * tl.floor(r * 0.5) != 0.0), r - 1.0, r) + zero_point
            else:
                v = (v.to(tl.float64) * inv_scale + zero_point).to(tl.float32).to(tl.float64)
                r = tl.floor(v + 0.5)
                v = tl.where((r - v == 0.5) & (r - 2.0 * tl.floor(r * 0.5) != 0.0), r - 1.0, r)
            q = tl.minimum(tl.maximum(v, lo), hi)
            tl.store(q_ptr + offsets, q.to(q_ptr.dtype.element_ty), mask=inside)

    return add_layer_norm_rows


def add_layer_norm(x: torch.Tensor, residual: Optional[torch.Tensor], weight: Optional[torch.Tensor],
                   bias: Optional[torch.Tensor], eps: float, return_sum: bool, quantize=None,
                   multiplier: Optional[torch.Tensor] = None):
    """Norm over the last dim of x (+ residual): y, or (y, x + residual) with return_sum, then the codes of y
    when `quantize` (an ir QuantizeAttrs) is given (multiplier: its per-channel factors, float32)."""
    import triton

    from ._triton_int8 import QRANGE, inverse_scale

    columns = x.shape[-1]
    x = x.contiguous()
    residual = None if residual is None else residual.contiguous()
    y = torch.empty_like(x)
    total = torch.empty_like(x) if return_sum else None
    codes = None if quantize is None else torch.empty_like(x, dtype=torch.uint8 if quantize.dtype == "uint8" else torch.int8)
    inv, zp, (lo, hi) = (1.0, 0, (0, 0)) if quantize is None else (inverse_scale(quantize.scale), quantize.zero_point,
                                                                    QRANGE[quantize.dtype])
    rows = x.numel() // columns if columns else 0
    if rows:
        block = triton.next_power_of_2(columns)
        _kernel()[(rows,)](x, x if residual is None else residual, x if weight is None else weight,
                           x if bias is None else bias, y, y if total is None else total,
                           x if multiplier is None else multiplier, y if codes is None else codes, columns, eps,
                           inv, float(zp), float(lo), float(hi),
                           HAS_RESIDUAL=residual is not None, HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,
                           WRITE_SUM=total is not None, QUANTIZE=codes is not None, HAS_MULTIPLIER=multiplier is not None,
                           BLOCK=block, num_warps=4 if block <= 1024 else 8)
    outs = [y, total] if return_sum else [y]
    if codes is not None:
        outs.append(codes)
    return tuple(outs) if len(outs) > 1 else y
