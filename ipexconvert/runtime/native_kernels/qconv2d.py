"""qconv2d on the native exact int8 GEMM, below avx512_vnni (see _int8_gemm.py): the uint8
input's channels-last view becomes GEMM rows, directly for a 1x1 stride-1 convolution, else
through an im2col copy whose padding holds the input zero point (so it adds nothing). The
output is channels-last."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ...ir.ops.qconv2d import dequantize_accum
from ..kernels import Kernel, NodeContext, register_kernel
from ._int8_gemm import Int8Gemm, runs_here


def gemm_rows(x: torch.Tensor, kernel: tuple[int, int], stride, padding, dilation, zero_point: int):
    """(rows [N * OH * OW, KH * KW * C] uint8, (N, OH, OW)) of an NCHW uint8 tensor, channels-last or not."""
    n, c, h, w = x.shape
    nhwc = x.permute(0, 2, 3, 1)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if (kh, kw, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0):
        return nhwc.reshape(n * h * w, c), (n, oh, ow)
    if ph or pw:
        nhwc = F.pad(nhwc, (0, 0, pw, pw, ph, ph), value=zero_point)
    hp, wp = nhwc.shape[1], nhwc.shape[2]
    nhwc = nhwc.contiguous()
    patches = nhwc.as_strided((n, oh, ow, kh, kw, c),
                              (hp * wp * c, sh * wp * c, sw * c, dh * wp * c, dw * c, 1))
    return patches.reshape(n * oh * ow, kh * kw * c), (n, oh, ow)


@register_kernel("cpu", "qconv2d")
def native_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    weight, a = ctx.constants[1], ctx.attrs
    if not runs_here(ctx) or weight is None or weight.dim() != 4 or a.groups != 1 or ctx.input_specs[0].rank != 4:
        return None
    o, c, kh, kw = weight.shape
    gemm = Int8Gemm.build(ctx, weight.permute(0, 2, 3, 1).reshape(o, kh * kw * c))  # K ordered (kh, kw, c)
    if gemm is None:
        return None

    def run(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        if x.shape[1] != c:
            raise ValueError(f"qconv2d input has {x.shape[1]} channels, the weight takes {c}")
        rows, (n, oh, ow) = gemm_rows(x, (kh, kw), a.stride, a.padding, a.dilation, a.x_zero_point)
        y = gemm(rows).view(n, oh, ow, o).permute(0, 3, 1, 2)
        return y if gemm.fully_fused else gemm.finish(y, dequantize_accum(inputs, a))

    held = {1, 2, 3} if ctx.input_specs[3] is not None else {1, 2}
    return Kernel(run, f"native:qconv2d@{ctx.isa}", frozenset(held), fresh_output=True)
