"""qconv2d on the GPU. Factories in preference order:

triton_int8_gemm (1x1 stride-1 convolutions, and those of fewer than 32 input channels such as an image's 3): the
int8 GEMM of qlinear with the epilogue, one Triton kernel (_triton_int8.run_int8_gemm), on the channels-last input's
rows (a 1x1 convolution is that GEMM) or on im2col rows one Triton kernel writes first
(_triton_int8.run_im2col_codes).
At batch 64 on an H200 these GEMMs took 0.55-0.86 of the implicit convolution's time on ResNet-50's 1x1 layers,
and the stem's 3 channels, gathered across taps inside the implicit GEMM, ran at a tenth of its other layers' rate.

triton_int8: the convolution as an implicit int8 GEMM on the tensor cores with the epilogue, one Triton kernel
(_triton_int8.run_int8_conv): exact int32 sums, no float copy of the input (input channels in multiples of 32
read a tap's channels at once; fewer, as an image's 3, are gathered across taps).

triton_tf32 (grouped convolutions): the codes less their zero point as float32 in one
Triton kernel, cuDNN's convolution on them in TF32, then the epilogue (scale, bias, the residual's codes
dequantized and added, relu, requantize) in one Triton kernel over the channels-last output
(_triton_int8.run_epilogue, as qlinear's).

torch: the TF32 convolution, the epilogue in torch operators and the op's own finish (a dozen kernels).

torch has no int8 convolution on CUDA. TF32 keeps 10 mantissa bits, so every uint8/int8 code (and a code
minus its zero point, |v| <= 255) is exact in it, and the tensor cores sum the products in float32: the
result is the integer sum up to float32 rounding, as exact as a float32 convolution, at tensor-core speed.
(bf16 holds the codes exactly too, but cuDNN would round its output to bf16.)"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops._quant import finish
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


class _Epilogue:
    """The constants of a qconv2d node's Triton epilogue (_triton_int8.run_epilogue's arguments)."""

    def __init__(self, ctx: NodeContext, plan: _triton_int8.EpiloguePlan, operand_codes: Optional[tuple[float, int]]):
        attrs, scales, bias = ctx.attrs, ctx.constants[2], ctx.constants[3]
        self.codes, self.operand_slots, self.operand_codes = plan.codes, plan.operand_slots, operand_codes
        self.quantize, self.out_dtype = plan.quantize, plan.out_dtype
        self.col_scale = (attrs.x_scale * scales.float()).contiguous()
        self.bias = None if bias is None else bias.float().contiguous()
        self.consumed = frozenset({1, 2} | ({3} if bias is not None else set()))

    @classmethod
    def of(cls, ctx: NodeContext) -> Optional["_Epilogue"]:
        """None where the constants are not known or the post-ops do not fit the Triton epilogue."""
        attrs = ctx.attrs
        weight, scales, bias = ctx.constants[1], ctx.constants[2], ctx.constants[3]
        plan = _triton_int8.EpiloguePlan.of(attrs)
        if (weight is None or scales is None or weight.dim() != 4 or (ctx.input_specs[3] is not None and bias is None)
                or plan is None or any(ctx.input_specs[i].rank != 4 for i in [0, *plan.operand_slots])):
            return None  # (operands of other ranks broadcast: the torch path)
        adds = {p.operand for p in attrs.post_ops if p.kind == "add" and p.operand is not None}
        operand_codes = None
        if attrs.accum_scale is not None:
            if set(plan.operand_slots) - adds:
                return None  # one dequantization for all operands: only add operands are codes
            operand_codes = (attrs.accum_scale, attrs.accum_zero_point)
        return cls(ctx, plan, operand_codes)


# Input channels below which a convolution with a window runs on im2col rows: an image's 3 channels, which the implicit
# GEMM gathers tap by tap at a tenth of its rate elsewhere. (Rows of taps x channels bytes for every output pixel: a
# bounded copy only for few channels; the stem's is 128 MB at batch 64.)
IM2COL_CHANNELS = 32


def _pointwise(attrs, weight: torch.Tensor) -> bool:
    """A 1x1 convolution with stride 1 and no padding: its output pixels are its input's, one GEMM row each."""
    return (tuple(weight.shape[2:]) == (1, 1) and tuple(attrs.stride) == (1, 1)
            and tuple(attrs.padding) == (0, 0))


@register_kernel("cuda", "qconv2d", runs_at=triton_missing)
def triton_int8_gemm_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """One Triton int8 GEMM with the epilogue, on the channels-last input's rows (a 1x1 stride-1 unpadded
    convolution) or on im2col rows (fewer than 32 input channels, as an image's 3). Needs groups 1."""
    attrs, epilogue = ctx.attrs, _Epilogue.of(ctx)
    weight = ctx.constants[1]
    if epilogue is None or attrs.groups != 1:
        return None
    cout, channels, kh, kw = weight.shape
    pointwise = _pointwise(attrs, weight)
    if not pointwise and channels >= IM2COL_CHANNELS:
        return None  # the implicit GEMM reads them in place (no rows the size of the window times the input)
    flip = ctx.input_specs[0].dtype == "uint8"
    offset = ((128 if flip else 0) - attrs.x_zero_point) * weight.sum(dim=(1, 2, 3), dtype=torch.int32)
    taps = weight.permute(0, 2, 3, 1).reshape(cout, kh * kw * channels)  # k = (tap, channel), as the rows
    depth = channels if pointwise else _triton_int8.im2col_depth(channels, kh * kw)
    weight_rows = torch.zeros((cout, depth), dtype=weight.dtype, device=weight.device)
    weight_rows[:, :taps.shape[1]] = taps  # (im2col's columns past the window meet zero weights)
    descriptors: dict = {}  # the weight's TMA descriptors by tile

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        if pointwise:
            pixels = x.permute(0, 2, 3, 1)  # [N, H, W, C]: the output's pixels, one row each
        else:
            pixels = _triton_int8.run_im2col_codes(x, (kh, kw), attrs.stride, attrs.padding, attrs.dilation,
                                                   attrs.x_zero_point)
        n, oh, ow, _ = pixels.shape
        rows = pixels.reshape(-1, depth)
        out = _triton_int8.run_int8_gemm(
            rows, weight_rows, flip, offset, epilogue.col_scale, epilogue.bias, epilogue.codes,
            [inputs[i].permute(0, 2, 3, 1) for i in epilogue.operand_slots], (n, oh, ow, cout), epilogue.out_dtype,
            epilogue.quantize, tile=_triton_int8.conv_gemm_tile(rows.shape[0], cout), weight_descriptors=descriptors,
            operand_codes=epilogue.operand_codes)
        return out.permute(0, 3, 1, 2)

    return Kernel(run, "triton:qconv2d_int8_gemm", epilogue.consumed, fresh_output=True)


@register_kernel("cuda", "qconv2d", runs_at=triton_missing)
def triton_int8_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """One Triton kernel: the convolution as an implicit int8 GEMM on the tensor cores (int32 sums, exact) and
    the epilogue. Needs groups 1."""
    attrs, epilogue = ctx.attrs, _Epilogue.of(ctx)
    weight = ctx.constants[1]
    if epilogue is None or attrs.groups != 1:
        return None
    flip = ctx.input_specs[0].dtype == "uint8"
    weight_taps = weight.permute(0, 2, 3, 1).contiguous()  # [Cout, KH, KW, C]: k = (tap, channel), C innermost
    offset = ((128 if flip else 0) - attrs.x_zero_point) * weight.sum(dim=(1, 2, 3), dtype=torch.int32)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        return _triton_int8.run_int8_conv(
            x, weight_taps, flip, attrs.x_zero_point, attrs.stride, attrs.padding, attrs.dilation, offset,
            epilogue.col_scale, epilogue.bias, epilogue.codes, [inputs[i] for i in epilogue.operand_slots],
            epilogue.out_dtype, epilogue.quantize, epilogue.operand_codes)

    return Kernel(run, "triton:qconv2d_int8", epilogue.consumed, fresh_output=True)


@register_kernel("cuda", "qconv2d", runs_at=triton_missing)
def triton_tf32_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """Three kernels: codes to float32 (Triton), the TF32 convolution (cuDNN), the epilogue (Triton)."""
    attrs, epilogue = ctx.attrs, _Epilogue.of(ctx)
    if epilogue is None:
        return None
    conv = _tf32_conv(attrs, ctx.constants[1])
    offset = torch.zeros(ctx.constants[1].shape[0], dtype=torch.int32, device=ctx.constants[1].device)
    channels_last = torch.channels_last

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if not (x.is_contiguous() or x.is_contiguous(memory_format=channels_last)):
            x = x.contiguous(memory_format=channels_last)  # codes_minus_zero_point runs over dense memory
        y = conv(_triton_int8.run_codes_minus_zero_point(x, attrs.x_zero_point))
        if not y.is_contiguous(memory_format=channels_last):
            y = y.contiguous(memory_format=channels_last)
        n, c, h, w = y.shape
        out = _triton_int8.run_epilogue(y.permute(0, 2, 3, 1).reshape(-1, c), offset, epilogue.col_scale,
                                        epilogue.bias, epilogue.codes,
                                        [inputs[i].permute(0, 2, 3, 1) for i in epilogue.operand_slots], (n, h, w, c),
                                        epilogue.out_dtype, epilogue.quantize, epilogue.operand_codes)
        return out.permute(0, 3, 1, 2)

    return Kernel(run, "triton:qconv2d_tf32", epilogue.consumed, fresh_output=True)


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
