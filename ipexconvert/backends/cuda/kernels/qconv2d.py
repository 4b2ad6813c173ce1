"""qconv2d on the GPU: cuDNN's convolution on the codes themselves, in TF32, then the float epilogue and the
op's own finish (post-ops, output dtype).

torch has no int8 convolution on CUDA. TF32 keeps 10 mantissa bits, so every uint8/int8 code (and a code
minus its zero point, |v| <= 255) is exact in it, and the tensor cores sum the products in float32: the
result is the integer sum up to float32 rounding, as exact as a float32 convolution, at tensor-core speed."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops._quant import finish
from ....ir.ops.qconv2d import dequantize_accum
from ....runtime.kernels import Kernel, NodeContext, register_kernel


@register_kernel("cuda", "qconv2d")
def torch_cuda_tf32_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    weight, scales, bias = ctx.constants[1], ctx.constants[2], ctx.constants[3]
    if weight is None or scales is None or weight.dim() != 4 or (ctx.input_specs[3] is not None and bias is None):
        return None
    weight_codes = weight.float().contiguous(memory_format=torch.channels_last)
    col_scale = (attrs.x_scale * scales.float()).view(1, -1, 1, 1)
    bias = None if bias is None else bias.float().view(1, -1, 1, 1)
    zero_point = float(attrs.x_zero_point)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].float() - zero_point
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=True):
            y = F.conv2d(x, weight_codes, None, attrs.stride, attrs.padding, attrs.dilation, attrs.groups)
        y = y * col_scale
        if bias is not None:
            y = y + bias
        return finish(y, attrs.post_ops, dequantize_accum(inputs, attrs), attrs)

    return Kernel(run, "torch_cuda:qconv2d_tf32", frozenset({1, 2} | ({3} if bias is not None else set())),
                  fresh_output=True)
