"""qconv2d (int8) on the CPU. Factories in preference order: onednn_direct (our oneDNN primitive per
layer, VNNI and up), torch_onednn (torch's oneDNN int8 operator, VNNI and up), then native (our exact
int8 GEMM, every level from avx2); the op's reference runs when all decline.

onednn_direct:
  qconv2d on a direct oneDNN primitive kept per layer (ipexconvert.backends.cpu.onednn_direct): uint8 activations,
  int8 weights with per-channel scales, bias, and a ReLU and/or a residual sum fused; uint8,
  bfloat16 or float32 output. A uint8 residual goes into a uint8 output in its own scale and zero
  point; into a float output (ResNet's last block) it is dequantized to the output's dtype first
  and summed as a float residual (by the native dequantize kernel: at [16, 2048, 7, 7], 0.33 ms
  against 3.8 ms for torch's three ops, bit-identical). A float residual needs an output of its dtype.

torch_onednn:
  qconv2d through oneDNN int8: weight packed once at load; bias, one unary and a residual add fused.

  torch.ops.onednn.qconv2d_pointwise mirrors qlinear (see torch_onednn_qlinear.py). Its .binary
  overload fuses "sum" (residual add, optionally followed by relu) of a float accumulator of
  the output's shape and dtype, or of a uint8 accumulator (accum_scale set, see
  passes/int8_residual.py) into a uint8 output. It writes into that accumulator, so the kernel
  hands it a copy: the residual may still be read by later nodes. oneDNN refuses a uint8
  accumulator with a float output (ResNet's last block, read by the float pooling): that runs
  the plain conv to float32 and the dequantized add (and relu) in torch.

native:
  qconv2d on the native exact int8 GEMM, below avx512_vnni (see _int8_gemm.py): the GEMM rows are
  the uint8 input's patches, gathered by the kernel from the channels-last image while it widens
  them (taps in the padding read the zero point, so they add nothing); no im2col buffer. A fused
  residual (uint8 with the accum scale, or float) is read through its NHWC view. The output is
  channels-last.
"""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.dims import same
from ....ir.ops._quant import dequantize
from ....ir.ops.qconv2d import dequantize_accum
from ....ir.postops import PostOp, apply_post_ops
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import native_lib, onednn_direct
from ..self_check import torch_ops
from ._int8_gemm import Int8Gemm, runs_here
from ._native import dense_view
from ._onednn_direct_conv import check_conv_constants, conv_kernel, fusable, same_shape
from ._torch_onednn import (enabled, int8_allowed, int8_output, int8_weight_params, plan_post_ops,
                            representative_conv_input, with_tail)
from . import _runs_at

_OUTPUTS = frozenset({"uint8", "bfloat16", "float32"})


@register_kernel("cpu", "qconv2d", runs_at=_runs_at.onednn_direct_int8)
def onednn_direct_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """Our oneDNN int8 convolution per layer: uint8 in, uint8 / bf16 / fp32 out, per-channel int8 weights, bias,
    relu and a uint8 or float residual fused; small int8 1x1 and 3x3 stride-2 layers run as a oneDNN matmul over
    NHWC / im2col rows."""
    a, x, out = ctx.attrs, ctx.input_specs[0], ctx.output_specs[0]
    if (ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa) or x.dtype != "uint8" or x.rank != 4
            or a.groups != 1 or a.output_dtype not in _OUTPUTS or not onednn_direct.usable(ctx.isa)):
        return None
    params = int8_weight_params(ctx)
    if params is None:
        return None
    check_conv_constants(ctx, "onednn_direct:qconv2d", bias_slot=3, scales_slot=2)
    u8_accum = a.accum_scale is not None

    def operand_ok(slot: int) -> bool:
        operand = ctx.input_specs[slot]
        dtype_ok = operand.dtype == "uint8" if u8_accum else (
            operand.dtype == a.output_dtype and a.output_dtype != "uint8")
        return dtype_ok and same_shape(operand, out)

    plan = fusable(a.post_ops, operand_ok)
    if plan is None:
        return None
    weight, scales, bias = params
    out_dtype = int8_output(a) or torch.uint8
    summed = plan.sum_operand is not None
    in_own_scale = summed and u8_accum and a.output_dtype == "uint8"  # oneDNN dequantizes it itself
    residual = None
    if summed and u8_accum and not in_own_scale:
        residual = _float_residual(a.accum_scale, a.accum_zero_point, out_dtype, ctx.isa)
    conv = onednn_direct.make_layer("onednn_direct:qconv2d", onednn_direct.raw.Conv, weight.contiguous(), scales, bias, tuple(a.stride),
                           tuple(a.padding), tuple(a.dilation), "uint8", a.output_dtype, relu=plan.relu, sum=summed,
                           sum_scale=a.accum_scale if in_own_scale else 1.0,
                           sum_zero_point=a.accum_zero_point if in_own_scale else 0,
                           x_scale=a.x_scale, x_zero_point=a.x_zero_point, y_scale=a.output_scale,
                           y_zero_point=a.output_zero_point)
    return conv_kernel(conv, weight.shape, a, out_dtype, out, plan.sum_operand, "onednn_direct:qconv2d",
                       frozenset({1, 2, 3}), residual, measure_shapes=True)


def _float_residual(scale: float, zero_point: int, out_dtype: torch.dtype, isa: str):
    """uint8 residual -> (r - zero_point) * scale in out_dtype, channels-last (the buffer oneDNN sums into)."""
    scales, zero_points = torch.tensor([scale], dtype=torch.float32), torch.tensor([zero_point], dtype=torch.int32)
    lib = native_lib.raw if native_lib.available() else None

    def residual(t: torch.Tensor) -> torch.Tensor:
        if lib is None or not t.is_contiguous(memory_format=torch.channels_last):
            return dequantize(t, scale, zero_point).to(out_dtype).contiguous(memory_format=torch.channels_last)
        nhwc, back = dense_view(t)
        out = torch.empty(nhwc.shape, dtype=out_dtype)
        lib.dequantize(nhwc, scales, zero_points, False, out, isa, torch.get_num_threads())
        return back(out)  # channels-last again

    return residual


@register_kernel("cpu", "qconv2d", runs_at=_runs_at.torch_onednn_int8)
def torch_onednn_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """torch's onednn.qconv2d_pointwise (+.binary for a residual add and relu, given a copy since oneDNN writes
    into it): uint8 in, float32 / bfloat16 / uint8 out."""
    if ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa) or ctx.input_specs[0].dtype != "uint8":
        return None
    params, out_dtype = int8_weight_params(ctx), int8_output(ctx.attrs)
    prepack = torch_ops.op_for("onednn.qconv_prepack", "int8")
    qconv = torch_ops.op_for("onednn.qconv2d_pointwise", "int8")
    binary_op = torch_ops.op_for("onednn.qconv2d_pointwise.binary", "int8")
    if params is None or out_dtype == "unsupported" or prepack is None or qconv is None:
        return None
    weight, scales, bias = params
    a, out = ctx.attrs, ctx.output_specs[0]
    u8_accum = a.accum_scale is not None

    def binary_ok(p: PostOp) -> bool:
        operand = ctx.input_specs[p.operand]
        # float accumulator: the output's dtype; uint8 accumulator: uint8 output only
        dtype_ok = (operand.dtype == "uint8" and out_dtype is None) if u8_accum else (
            operand.dtype == out.dtype and out_dtype is not None)
        return (binary_op is not None and p.kind == "add" and dtype_ok and operand.rank == 4
                and all(same(x, y) for x, y in zip(operand.shape, out.shape)))

    # A uint8 operand with a float output: every post-op runs in torch, on the dequantized operand.
    plan = plan_post_ops([] if u8_accum and out_dtype is not None else a.post_ops, binary_ok, frozenset({"relu"}))
    if plan.tail and out_dtype is None:
        return None
    # Packed for the real input size (batch 1): packed without it, oneDNN reordered the weight of
    # the 56x56 convs on every call (7 reorders a run at batch 1, 16 at batch 16).
    packed = prepack(weight.contiguous(), scales, a.x_scale, a.x_zero_point, a.stride, a.padding, a.dilation,
                     a.groups, representative_conv_input(ctx.input_specs[0]))
    zero_points = torch.zeros(weight.shape[0], dtype=torch.int64)
    conv_args = (a.stride, a.padding, a.dilation, a.groups)
    # oneDNN returns channels-last even for a contiguous input: give the spec's layout.
    layout = torch.channels_last if out.memory_format == "channels_last" else torch.contiguous_format

    if u8_accum and out_dtype is not None:
        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            y = qconv(inputs[0], a.x_scale, a.x_zero_point, packed, scales, zero_points, bias, *conv_args,
                      1.0, 0, torch.float32, "none", [], "")
            y = apply_post_ops(y, a.post_ops, dequantize_accum(inputs, a))
            return y.to(out_dtype).contiguous(memory_format=layout)
    elif plan.binary is None:
        attr, algorithm = plan.unary or ("none", "")

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            y = qconv(inputs[0], a.x_scale, a.x_zero_point, packed, scales, zero_points, bias, *conv_args,
                      a.output_scale, a.output_zero_point, out_dtype, attr, [], algorithm)
            return y.contiguous(memory_format=layout)
    else:
        slot = plan.binary.operand
        unary = plan.binary_unary[0] if plan.binary_unary else None

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            accum = inputs[slot].contiguous(memory_format=torch.channels_last).clone(
                memory_format=torch.channels_last)
            y = binary_op(inputs[0], a.x_scale, a.x_zero_point, packed, scales, zero_points, accum, bias,
                          *conv_args, a.output_scale, a.output_zero_point, out_dtype, a.accum_scale or 1.0,
                          a.accum_zero_point, "sum", 1.0, unary, [], None)
            return y.contiguous(memory_format=layout)

    return Kernel(with_tail(run, plan.tail), "torch_onednn:qconv2d", frozenset({1, 2, 3}))


def nhwc(x: torch.Tensor) -> torch.Tensor:
    """The dense NHWC view of a 4-D tensor (a channels-last copy first if it is not one)."""
    return x.contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1)


@register_kernel("cpu", "qconv2d", runs_at=_runs_at.native_int8_gemm)
def native_qconv2d(ctx: NodeContext) -> Optional[Kernel]:
    """Our exact int8 GEMM below VNNI: the uint8 patches gathered from the channels-last image and widened to int16
    (vpmaddwd into int32); scale, bias, relu, residual and output quantization fused."""
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
        # the residual dequantized for a torch tail only when there is one (a fused one was read as codes)
        return y if gemm.complete else gemm.finish(y, dequantize_accum(inputs, a))

    held = {1, 2, 3} if ctx.input_specs[3] is not None else {1, 2}
    return Kernel(run, f"native:qconv2d@{ctx.isa}", frozenset(held), fresh_output=True)
