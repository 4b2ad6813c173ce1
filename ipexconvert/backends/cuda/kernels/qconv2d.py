"""qconv2d on the GPU: cuDNN's convolution on the codes themselves, in TF32, then the epilogue. Factories in
preference order:

triton: the codes less their zero point as float32 in one Triton kernel, cuDNN's convolution, then the
epilogue (scale, bias, the residual's codes dequantized and added, relu, requantize) in one Triton kernel over
the channels-last output (_triton_int8.run_epilogue, as qlinear's). The torch path takes a dozen kernels.

torch: the same in torch operators and the op's own finish.

torch has no int8 convolution on CUDA. TF32 keeps 10 mantissa bits, so every uint8/int8 code (and a code
minus its zero point, |v| <= 255) is exact in it, and the tensor cores sum the products in float32: the
result is the integer sum up to float32 rounding, as exact as a float32 convolution, at tensor-core speed.
(bf16 holds the codes exactly too, but cuDNN would round its output to bf16.)"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir import dtypes
from ....ir.ops._quant import QRANGE, finish
from ....ir.ops.qconv2d import dequantize_accum
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton_int8
from ._triton import triton_missing


def _tf32_conv(attrs, weight: torch.Tensor):
    """The convolution of codes less their zero point (float32) with the weight's codes, in TF32."""
    weight_codes = weight.float().contiguous(memory_format=torch.channels_last)

    def conv(x: torch.Tensor) -> torch.Tensor:
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=True):
            return F.conv2d(x, weight_codes, None, attrs.stride, attrs.padding, attrs.dilation, attrs.groups)

    return conv


@register_kernel("cuda", "qconv2d", runs_at=triton_missing)
def triton_tf32_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """Three kernels: codes to float32 (Triton), the TF32 convolution (cuDNN), the epilogue (Triton)."""
    attrs = ctx.attrs
    weight, scales, bias = ctx.constants[1], ctx.constants[2], ctx.constants[3]
    fused = _triton_int8.post_op_codes(attrs.post_ops)
    if (weight is None or scales is None or weight.dim() != 4 or (ctx.input_specs[3] is not None and bias is None)
            or fused is None):
        return None
    codes, operand_slots = fused
    adds = {p.operand for p in attrs.post_ops if p.kind == "add" and p.operand is not None}
    operand_codes = None
    if attrs.accum_scale is not None:
        if set(operand_slots) - adds:
            return None  # one dequantization for all operands: only add operands are codes
        operand_codes = (attrs.accum_scale, attrs.accum_zero_point)
    conv = _tf32_conv(attrs, weight)
    channels = weight.shape[0]
    offset = torch.zeros(channels, dtype=torch.int32, device=weight.device)
    col_scale = (attrs.x_scale * scales.float()).contiguous()
    bias = None if bias is None else bias.float().contiguous()
    quantize = (attrs.output_scale, attrs.output_zero_point, attrs.output_dtype) if attrs.output_dtype in QRANGE else None
    out_dtype = dtypes.to_torch(attrs.output_dtype)
    fallback = torch_cuda_tf32_qconv2d(ctx)
    channels_last = torch.channels_last

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        operands = [inputs[i] for i in operand_slots]
        if x.dim() != 4 or not (x.is_contiguous() or x.is_contiguous(memory_format=channels_last)) or any(
                t.dim() != 4 for t in operands):
            return fallback.fn(inputs, dims)
        y = conv(_triton_int8.run_codes_minus_zero_point(x, attrs.x_zero_point))
        if not y.is_contiguous(memory_format=channels_last):
            y = y.contiguous(memory_format=channels_last)
        n, c, h, w = y.shape
        out = _triton_int8.run_epilogue(y.permute(0, 2, 3, 1).reshape(-1, c), offset, col_scale, bias, codes,
                                        [t.permute(0, 2, 3, 1) for t in operands], (n, h, w, c), out_dtype, quantize,
                                        operand_codes)
        return out.permute(0, 3, 1, 2)

    return Kernel(run, "triton:qconv2d_tf32", frozenset({1, 2} | ({3} if bias is not None else set())),
                  fresh_output=True)


@register_kernel("cuda", "qconv2d")
def torch_cuda_tf32_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    weight, scales, bias = ctx.constants[1], ctx.constants[2], ctx.constants[3]
    if weight is None or scales is None or weight.dim() != 4 or (ctx.input_specs[3] is not None and bias is None):
        return None
    conv = _tf32_conv(attrs, weight)
    col_scale = (attrs.x_scale * scales.float()).view(1, -1, 1, 1)
    bias = None if bias is None else bias.float().view(1, -1, 1, 1)
    zero_point = float(attrs.x_zero_point)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        y = conv(inputs[0].float() - zero_point) * col_scale
        if bias is not None:
            y = y + bias
        return finish(y, attrs.post_ops, dequantize_accum(inputs, attrs), attrs)

    return Kernel(run, "torch_cuda:qconv2d_tf32", frozenset({1, 2} | ({3} if bias is not None else set())),
                  fresh_output=True)
