"""qlinear on the GPU: an int8 x int8 -> int32 GEMM (torch._int_mm, cuBLASLt), exact like the CPU's VNNI/AMX
kernels, then the float epilogue and the op's own finish (post-ops, output dtype).

uint8 codes become int8 by subtracting 128 (a flip of the top bit), and the zero point moves into a
per-column constant: sum_k (x_k - zp) w_nk = sum_k (x_k - shift) w_nk + (shift - zp) * sum_k w_nk.
_int_mm refuses fewer than 17 rows, so small batches are padded to 32 rows (zeros, sliced off); it wants
K and N in multiples of 8 (otherwise this factory declines and the reference runs)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops._quant import finish
from ....runtime.kernels import Kernel, NodeContext, register_kernel

_MIN_ROWS = 32  # padded row count below _int_mm's minimum of 17


@register_kernel("cuda", "qlinear")
def torch_cuda_int_mm_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    weight, scales, bias = ctx.constants[1], ctx.constants[2], ctx.constants[3]
    if weight is None or scales is None or weight.dim() != 2 or (ctx.input_specs[3] is not None and bias is None):
        return None
    n, k = weight.shape
    if k % 8 or n % 8 or k == 0:
        return None
    shift = 128 if ctx.input_specs[0].dtype == "uint8" else 0
    weight_kn = weight.contiguous().t()  # [K, N], column-major: the layout _int_mm takes for its second operand
    offset = (shift - attrs.x_zero_point) * weight.sum(dim=1, dtype=torch.int32)
    col_scale = attrs.x_scale * scales.float()
    bias = None if bias is None else bias.float()

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.reshape(-1, k)
        if shift:
            rows = torch.bitwise_xor(rows, 128).view(torch.int8)
        m = rows.shape[0]
        if m < 17:
            rows = F.pad(rows, (0, 0, 0, _MIN_ROWS - m))
        acc = torch._int_mm(rows, weight_kn)[:m]
        y = (acc + offset).float() * col_scale
        if bias is not None:
            y = y + bias
        return finish(y.reshape(*x.shape[:-1], n), attrs.post_ops, inputs, attrs)

    return Kernel(run, "torch_cuda:qlinear_int_mm", frozenset({1, 2} | ({3} if bias is not None else set())),
                  fresh_output=True)
