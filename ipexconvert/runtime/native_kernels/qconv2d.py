"""qconv2d on the native exact int8 GEMM, below avx512_vnni (see _int8_gemm.py): the GEMM rows are
the uint8 input's patches, gathered by the kernel from the channels-last image while it widens
them (taps in the padding read the zero point, so they add nothing); no im2col buffer. A fused
residual (uint8 with the accum scale, or float) is read through its NHWC view. The output is
channels-last."""
from __future__ import annotations

from typing import Optional

import torch

from ...ir.ops.qconv2d import dequantize_accum
from ..kernels import Kernel, NodeContext, register_kernel
from ._int8_gemm import Int8Gemm, runs_here


def nhwc(x: torch.Tensor) -> torch.Tensor:
    """The dense NHWC view of a 4-D tensor (a channels-last copy first if it is not one)."""
    return x.contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1)


@register_kernel("cpu", "qconv2d")
def native_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    weight, a = ctx.constants[1], ctx.attrs
    if not runs_here(ctx) or weight is None or weight.dim() != 4 or a.groups != 1 or ctx.input_specs[0].rank != 4:
        return None
    o, c, kh, kw = weight.shape
    residual_quant = None if a.accum_scale is None else (a.accum_scale, a.accum_zero_point)
    gemm = Int8Gemm.build(ctx, weight.permute(0, 2, 3, 1).reshape(o, kh * kw * c), residual_quant)  # K in (kh, kw, c) order
    if gemm is None:
        return None
    conv = [kh, kw, *a.stride, *a.padding, *a.dilation]

    def run(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        if x.shape[1] != c:
            raise ValueError(f"qconv2d input has {x.shape[1]} channels, the weight takes {c}")
        n, _, h, w = x.shape
        oh = (h + 2 * a.padding[0] - a.dilation[0] * (kh - 1) - 1) // a.stride[0] + 1
        ow = (w + 2 * a.padding[1] - a.dilation[1] * (kw - 1) - 1) // a.stride[1] + 1
        y = gemm(nhwc(x), n * oh * ow, inputs, lambda r: nhwc(r).reshape(-1, o), conv)
        y = y.view(n, oh, ow, o).permute(0, 3, 1, 2)
        return gemm.finish(y, dequantize_accum(inputs, a))

    held = {1, 2, 3} if ctx.input_specs[3] is not None else {1, 2}
    return Kernel(run, f"native:qconv2d@{ctx.isa}", frozenset(held), fresh_output=True)
