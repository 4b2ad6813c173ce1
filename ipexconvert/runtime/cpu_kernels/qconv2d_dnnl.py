"""qconv2d on a direct oneDNN primitive kept per layer (ipexconvert.dnnl): uint8 activations,
int8 weights with per-channel scales, bias, and a ReLU and/or a residual sum fused; uint8,
bfloat16 or float32 output. A uint8 residual needs a uint8 output (oneDNN sums it in its own
scale there), a float residual an output of its dtype; other cases go to qconv2d_onednn.py.
"""
from __future__ import annotations

from typing import Optional

import torch

from ... import dnnl
from ..kernels import Kernel, NodeContext, register_kernel
from ._common import enabled, int8_allowed, int8_output, int8_weight_params
from ._dnnl_conv import conv_run, fusable, same_shape

_OUT = {"uint8": "uint8", "bfloat16": "bfloat16", "float32": "float32"}


@register_kernel("cpu", "qconv2d")
def qconv2d_dnnl(ctx: NodeContext) -> Optional[Kernel]:
    a, x, out = ctx.attrs, ctx.input_specs[0], ctx.output_specs[0]
    if (ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa) or x.dtype != "uint8" or x.rank != 4
            or a.groups != 1 or a.output_dtype not in _OUT or not dnnl.usable(ctx.isa)):
        return None
    params = int8_weight_params(ctx)
    if params is None:
        return None
    u8_accum = a.accum_scale is not None

    def operand_ok(slot: int) -> bool:
        operand = ctx.input_specs[slot]
        dtype_ok = (operand.dtype == "uint8" and a.output_dtype == "uint8") if u8_accum else (
            operand.dtype == a.output_dtype and a.output_dtype != "uint8")
        return dtype_ok and same_shape(operand, out)

    plan = fusable(a.post_ops, operand_ok)
    if plan is None:
        return None
    weight, scales, bias = params
    summed = plan.sum_operand is not None
    conv = dnnl.raw.Conv(weight.contiguous(), scales, bias, tuple(a.stride), tuple(a.padding), tuple(a.dilation),
                         "uint8", _OUT[a.output_dtype], relu=plan.relu, sum=summed,
                         sum_scale=(a.accum_scale if u8_accum else 1.0) if summed else 1.0,
                         sum_zero_point=a.accum_zero_point if (summed and u8_accum) else 0,
                         x_scale=a.x_scale, x_zero_point=a.x_zero_point, y_scale=a.output_scale,
                         y_zero_point=a.output_zero_point)
    run = conv_run(conv, weight.shape, a, int8_output(a) or torch.uint8, out, plan.sum_operand)
    return Kernel(run, "dnnl:qconv2d", frozenset({1, 2, 3}))
