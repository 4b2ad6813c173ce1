"""Launching the Triton kernels for int8 layers on the GPU (_triton_jit.py): what follows the integer GEMM
in one pass, and quantize.

epilogue: from the int32 accumulator of an int8 GEMM to the layer's output in one kernel: the zero-point
column term, the per-column scale, the bias, up to four post-ops (relu, gelu, gelu_tanh, silu, sigmoid,
tanh; add/mul of up to two operands broadcast to the output), then the float output dtype or the
requantized codes. The reference (ir/ops/_quant.py finish) takes a dozen kernels for the same.

quantize: float -> uint8/int8 codes, per tensor or with a per-channel multiplier.

Both follow the reference's arithmetic (ir/ops/_quant.py quantize; _triton_jit.codes_of): per tensor, x * (1 / scale) + zero point
computed in float64 and rounded once to float32; with a multiplier, the float32 product; then rounding half
to even and clamping. Rounding half to even is written out (floor(v + 0.5) in float64, exact for every
float32 v, moved down at an odd tie), since libdevice's rint is not available in Triton's interpreter, in
which these kernels are also tried on the CPU (TRITON_INTERPRET=1).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import _triton

UNARY_CODES = {"relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "sigmoid": 5, "tanh": 6}
BINARY_CODES = {"add": 10, "mul": 12}  # + operand slot (0 or 1)
MAX_POST_OPS = 4
QRANGE = {"uint8": (0, 255), "int8": (-128, 127)}


def post_op_codes(post_ops) -> Optional[tuple[list[int], list[int]]]:
    """(codes, operand node inputs) for the epilogue, or None when the chain does not fit it."""
    codes, operands = [], []
    for p in post_ops:
        if p.operand is None:
            codes.append(UNARY_CODES[p.kind])
        else:
            if p.operand not in operands:
                operands.append(p.operand)
            if len(operands) > 2:
                return None
            codes.append(BINARY_CODES[p.kind] + operands.index(p.operand))
    if len(codes) > MAX_POST_OPS:
        return None
    return codes + [0] * (MAX_POST_OPS - len(codes)), operands


def inverse_scale(scale: float) -> float:
    """1 / scale in float32, as the reference computes it (then exact in float64)."""
    return float(1.0 / torch.tensor(scale, dtype=torch.float32))


def _as_rows(operand: torch.Tensor, shape: Sequence[int], rows: int, cols: int) -> torch.Tensor:
    """The operand broadcast to the output's shape, as [rows, cols] (strides may be 0: no copy if possible)."""
    return torch.broadcast_to(operand, tuple(shape)).reshape(rows, cols)


def run_epilogue(acc: torch.Tensor, offset: torch.Tensor, col_scale: torch.Tensor, bias: Optional[torch.Tensor],
                 codes: list[int], operands: list[torch.Tensor], shape: Sequence[int], out_dtype: torch.dtype,
                 quantize: Optional[tuple[float, int, str]]) -> torch.Tensor:
    """acc [rows, cols] int32 -> the layer's output of `shape` (quantize: (scale, zero point, dtype) or None)."""
    rows, cols = acc.shape
    out = torch.empty((rows, cols), dtype=out_dtype, device=acc.device)
    a, b = (list(operands) + [None, None])[:2]
    a = None if a is None else _as_rows(a, shape, rows, cols)
    b = None if b is None else _as_rows(b, shape, rows, cols)
    inv, zp, lo, hi = 1.0, 0, 0, 0
    if quantize is not None:
        inv, zp, (lo, hi) = inverse_scale(quantize[0]), quantize[1], QRANGE[quantize[2]]
    if rows and cols:
        block_m, block_n = 16, 128
        grid = ((rows + block_m - 1) // block_m, (cols + block_n - 1) // block_n)
        _triton.jit().epilogue[grid](acc, offset, col_scale, acc if bias is None else bias, acc if a is None else a,
                            acc if b is None else b, out, rows, cols,
                            0 if a is None else a.stride(0), 0 if a is None else a.stride(1),
                            0 if b is None else b.stride(0), 0 if b is None else b.stride(1),
                            inv, float(zp), float(lo), float(hi),
                            HAS_BIAS=bias is not None, HAS_A=a is not None, HAS_B=b is not None,
                            P0=codes[0], P1=codes[1], P2=codes[2], P3=codes[3], QUANTIZE=quantize is not None,
                            BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return out.reshape(tuple(shape))


def run_quantize(x: torch.Tensor, scale: float, zero_point: int, dtype: str,
                 multiplier: Optional[torch.Tensor], channels: Optional[int] = None) -> torch.Tensor:
    """Codes of x (contiguous in the memory format it has: the result keeps it), as ir/ops/_quant.quantize;
    the multiplier runs over the innermost `channels` elements (default: the last dim)."""
    out = torch.empty_like(x, dtype=torch.uint8 if dtype == "uint8" else torch.int8)
    lo, hi = QRANGE[dtype]
    n = x.numel()
    if n:
        block = 1024
        _triton.jit().quantize[((n + block - 1) // block,)](
            x, x if multiplier is None else multiplier, out, n, channels or (x.shape[-1] if x.dim() else 1),
            inverse_scale(scale), float(zero_point), float(lo), float(hi),
            HAS_MULTIPLIER=multiplier is not None, BLOCK=block, num_warps=4)
    return out
