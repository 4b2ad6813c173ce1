"""Launching the Triton kernel for layer_norm and add_layer_norm on the GPU (_triton_jit.add_layer_norm_rows):
a row per program, the residual sum (rounded to the activations' dtype, as the reference's `x + r` is)
optionally written out, then the norm in float32 and one rounding to the activations' dtype, then
optionally the codes of the result for the int8 layer after it (the quantize arithmetic, codes_of). One kernel where torch needs two (add,
norm), and the reference a dozen with the quantize."""
from __future__ import annotations

from typing import Optional

import torch

from . import _triton

MAX_COLUMNS = 16384  # one row per program, held in registers: wider rows run torch's kernels


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
        _triton.jit().add_layer_norm_rows[(rows,)](x, x if residual is None else residual, x if weight is None else weight,
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
