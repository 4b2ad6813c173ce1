"""qlinear on the GPU: an int8 x int8 -> int32 GEMM, exact like the CPU's VNNI/AMX kernels, then the epilogue.
Factories in preference order:

triton_int8_gemm: the GEMM and the epilogue in one Triton kernel (_triton_int8.run_int8_gemm).

triton_int_mm: torch._int_mm (cuBLASLt), then the epilogue (zero-point term, scales, bias, post-ops, output dtype
or requantized codes) in one Triton kernel (_triton_int8.py).

torch_cuda: the same epilogue in torch operators, then the op's own finish.

uint8 codes become int8 by subtracting 128 (a flip of the top bit), and the zero point moves into a
per-column constant: sum_k (x_k - zp) w_nk = sum_k (x_k - shift) w_nk + (shift - zp) * sum_k w_nk.
_int_mm refuses fewer than 17 rows, so small batches are padded to 32 rows (zeros, sliced off); it wants
K and N in multiples of 8 (otherwise the _int_mm factories decline)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops._quant import finish
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton_int8
from ._triton import triton_missing

_MIN_ROWS = 32  # padded row count below _int_mm's minimum of 17


class _IntGemm:
    """The constants of one qlinear node as the GPU GEMM wants them, and the GEMM itself."""

    def __init__(self, ctx: NodeContext, weight: torch.Tensor, scales: torch.Tensor, bias: Optional[torch.Tensor]):
        self.n, self.k = weight.shape
        self.shift = 128 if ctx.input_specs[0].dtype == "uint8" else 0
        self.weight_nk = weight.contiguous()  # [N, K]: K contiguous, as the tensor cores read both operands
        self.weight_kn = self.weight_nk.t()  # the same memory as [K, N], column-major: _int_mm's second operand
        self.offset = (self.shift - ctx.attrs.x_zero_point) * weight.sum(dim=1, dtype=torch.int32)
        self.col_scale = ctx.attrs.x_scale * scales.float()
        self.bias = None if bias is None else bias.float()
        self.consumed = frozenset({1, 2} | ({3} if bias is not None else set()))
        self.descriptors: dict = {}  # the weight's TMA descriptors by tile (_triton_int8.run_int8_gemm)

    @classmethod
    def of(cls, ctx: NodeContext, multiple: int = 8) -> Optional["_IntGemm"]:
        """The node's GEMM, or None where its constants are not all known or K and N are not multiples of
        `multiple` (8 for _int_mm)."""
        weight, scales, bias = ctx.constants[1], ctx.constants[2], ctx.constants[3]
        if weight is None or scales is None or weight.dim() != 2 or (ctx.input_specs[3] is not None and bias is None):
            return None
        n, k = weight.shape
        return None if k % multiple or n % multiple or k == 0 else cls(ctx, weight, scales, bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x's codes [..., K] -> the int32 accumulator [rows, N] (without the zero-point term)."""
        rows = x.reshape(-1, self.k)
        if self.shift:
            rows = torch.bitwise_xor(rows, 128).view(torch.int8)
        m = rows.shape[0]
        if m < 17:
            rows = F.pad(rows, (0, 0, 0, _MIN_ROWS - m))
        return torch._int_mm(rows, self.weight_kn)[:m]


@register_kernel("cuda", "qlinear", runs_at=triton_missing)
def triton_int8_gemm_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """One Triton kernel: the int8 GEMM on the tensor cores and the epilogue (up to 4 post-ops, 2 operands)."""
    gemm, plan = _IntGemm.of(ctx, multiple=1), _triton_int8.EpiloguePlan.of(ctx.attrs)
    if gemm is None or plan is None:
        return None

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.reshape(-1, gemm.k)
        if rows.stride(-1) != 1:
            rows = rows.contiguous()
        return _triton_int8.run_int8_gemm(rows, gemm.weight_nk, gemm.shift != 0, gemm.offset, gemm.col_scale,
                                          gemm.bias, plan.codes, [inputs[i] for i in plan.operand_slots],
                                          (*x.shape[:-1], gemm.n), plan.out_dtype, plan.quantize,
                                          weight_descriptors=gemm.descriptors)

    return Kernel(run, "triton:qlinear_int8_gemm", gemm.consumed, fresh_output=True)


@register_kernel("cuda", "qlinear", runs_at=triton_missing)
def triton_int_mm_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """_int_mm, then one Triton kernel for the epilogue (up to 4 post-ops, 2 operands)."""
    gemm, plan = _IntGemm.of(ctx), _triton_int8.EpiloguePlan.of(ctx.attrs)
    if gemm is None or plan is None:
        return None

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        return _triton_int8.run_epilogue(gemm(x), gemm.offset, gemm.col_scale, gemm.bias, plan.codes,
                                         [inputs[i] for i in plan.operand_slots], (*x.shape[:-1], gemm.n),
                                         plan.out_dtype, plan.quantize)

    return Kernel(run, "triton:qlinear_int_mm", gemm.consumed, fresh_output=True)


@register_kernel("cuda", "qlinear")
def torch_cuda_int_mm_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """_int_mm, then the epilogue and finish in torch operators."""
    attrs, gemm = ctx.attrs, _IntGemm.of(ctx)
    if gemm is None:
        return None

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        y = (gemm(x) + gemm.offset).float() * gemm.col_scale
        if gemm.bias is not None:
            y = y + gemm.bias
        return finish(y.reshape(*x.shape[:-1], gemm.n), attrs.post_ops, inputs, attrs)

    return Kernel(run, "torch_cuda:qlinear_int_mm", gemm.consumed, fresh_output=True)
