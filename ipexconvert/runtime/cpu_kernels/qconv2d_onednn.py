"""qconv2d through oneDNN int8: weight packed once at load; bias, one unary and a residual add fused.

torch.ops.onednn.qconv2d_pointwise mirrors qlinear (see qlinear_onednn.py). Its .binary
overload fuses "sum" (residual add, optionally followed by relu) of a float accumulator of
the output's shape and dtype, or of a uint8 accumulator (accum_scale set, see
passes/int8_residual.py) into a uint8 output. It writes into that accumulator, so the kernel
hands it a copy: the residual may still be read by later nodes. oneDNN refuses a uint8
accumulator with a float output (ResNet's last block, read by the float pooling): that runs
the plain conv to float32 and the dequantized add (and relu) in torch.
"""
from __future__ import annotations

from typing import Optional

import torch

from ...ir.dims import same
from ...ir.ops.qconv2d import dequantize_accum
from ...ir.postops import PostOp, apply_post_ops
from ..kernels import Kernel, NodeContext, register_kernel
from . import probe
from ._common import (enabled, int8_allowed, int8_output, int8_weight_params, plan_post_ops, representative_conv_input,
                      with_tail)


@register_kernel("cpu", "qconv2d")
def qconv2d_onednn(ctx: NodeContext) -> Optional[Kernel]:
    if ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa) or ctx.input_specs[0].dtype != "uint8":
        return None
    params, out_dtype = int8_weight_params(ctx), int8_output(ctx.attrs)
    prepack = probe.op_for("onednn.qconv_prepack", "int8")
    qconv = probe.op_for("onednn.qconv2d_pointwise", "int8")
    binary_op = probe.op_for("onednn.qconv2d_pointwise.binary", "int8")
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

    return Kernel(with_tail(run, plan.tail), "onednn:qconv2d", frozenset({1, 2, 3}))
