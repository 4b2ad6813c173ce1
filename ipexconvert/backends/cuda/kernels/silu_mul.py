"""silu_mul on the GPU: one Triton kernel (_triton_jit.silu_mul_rows) reading the gate and up values where they
are (two tensors, or the two halves of a merged gate/up output) and writing silu(gate) * up once. The reference
takes five kernels for bf16 (two casts of strided halves to float32, silu, the product, the cast back)."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.silu_mul import halves
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing

BLOCK = 1024  # columns a program computes


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """t as [rows, n] with unit column stride (a view where the strides allow, else a copy)."""
    rows = t.reshape(-1, n) if t.numel() else t.reshape(0, n)
    return rows if rows.stride(-1) == 1 else rows.contiguous()


@register_kernel("cuda", "silu_mul", runs_at=triton_missing)
def triton_silu_mul(ctx: NodeContext) -> Optional[Kernel]:
    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return silu_mul_rows(*(halves(inputs[0]) if len(inputs) == 1 else inputs[:2]))

    return Kernel(run, "triton:silu_mul", fresh_output=True)


def silu_mul_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """silu(a) * b in a's dtype in one Triton kernel (also woq_linear.float_rows' prologue)."""
    import triton

    n = a.shape[-1]
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    if out.numel():
        a_rows, b_rows = _rows(a, n), _rows(b, n)
        _triton.jit().silu_mul_rows[(a_rows.shape[0], triton.cdiv(n, BLOCK))](
            a_rows, b_rows, out, n, a_rows.stride(0), b_rows.stride(0), BLOCK=BLOCK, num_warps=4)
    return out
