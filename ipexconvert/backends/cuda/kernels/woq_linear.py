"""woq_linear on the GPU. Factories in preference order:

triton: up to MAX_ROWS rows of x (a decode step's tokens) times the quantized weight in one Triton kernel
(_triton_jit.woq_rows): the codes read as stored (int4 two a byte, int8), (q - zero) * x summed per run of a group
and scaled, never forming the float weight; int8 activations rounded per row inside it; the bias and post-ops
(residual add, SiLU, the gate product) in the same pass. More rows (a prompt) run the reference, which
dequantizes the weight once per call and multiplies on cuBLAS in float32."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.woq_linear import SYMMETRIC_INT4_ZERO, WoqLinearOp
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing
from ._triton_int8 import _as_rows, post_op_codes

MAX_ROWS = 4
BLOCK_N = 16  # output columns a program computes
CHUNK = 512  # k a step reads per output column
NUM_WARPS = 4  # (benchmarks/gpu_woq_sweep.py times other choices)


def run_length(group_size: int) -> int:
    """The longest power-of-two run of k (at most 128) that lies inside one group wherever a group starts."""
    run = 1
    while run < 128 and group_size % (run * 2) == 0:
        run *= 2
    return run


@register_kernel("cuda", "woq_linear", runs_at=triton_missing)
def triton_woq_linear(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    codes, scales, zeros, bias = ctx.constants[1:5]
    if codes is None or scales is None or (ctx.input_specs[3] is not None and zeros is None) \
            or (ctx.input_specs[4] is not None and bias is None):
        return None  # computed weights: the reference
    fitted = post_op_codes(attrs.post_ops)
    sub = run_length(attrs.group_size)
    if fitted is None or (attrs.bits == 4 and sub < 2):
        return None
    import triton  # (runs_at has said it is here)

    post, operand_slots = fitted
    n, k = scales.shape[0], scales.shape[1] * attrs.group_size
    chunk, block_n, warps = CHUNK, BLOCK_N, NUM_WARPS  # (read once: a sweep may change them between factories)
    subs = max(1, chunk // sub)
    while subs > 1 and sub * subs // 2 >= k:
        subs //= 2
    scales, zeros = scales.float().contiguous(), None if zeros is None else zeros.contiguous()
    bias = None if bias is None else bias.float().contiguous()
    codes = codes.contiguous()
    reference = WoqLinearOp.compile(attrs)
    zero = SYMMETRIC_INT4_ZERO if attrs.bits == 4 else 0

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.numel() // k if k else 0
        if rows == 0 or rows > MAX_ROWS:
            return reference([x, codes, scales, zeros, bias, *inputs[5:]], dims)
        out_shape = (*x.shape[:-1], n)
        flat = x.reshape(rows, k).contiguous()
        out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
        operands = [_as_rows(inputs[i], out_shape, rows, n) for i in operand_slots]
        a = operands[0] if operands else out
        b = operands[1] if len(operands) > 1 else out
        _triton.jit().woq_rows[(triton.cdiv(n, block_n),)](
            flat, codes, scales, scales if zeros is None else zeros, scales if bias is None else bias, a, b, out,
            rows, n, k, scales.shape[1], attrs.group_size, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            BITS=attrs.bits, ZERO=zero, HAS_ZEROS=zeros is not None, HAS_BIAS=bias is not None,
            INT8_ROWS=attrs.activations == "int8", HAS_A=len(operands) > 0, HAS_B=len(operands) > 1,
            P0=post[0], P1=post[1], P2=post[2], P3=post[3], ROWS=triton.next_power_of_2(rows), SUB=sub, SUBS=subs,
            BLOCK_N=block_n, num_warps=warps)
        return out.view(out_shape)

    return Kernel(run, "triton:woq_linear_rows", frozenset({1, 2, 3, 4}), fresh_output=True)

