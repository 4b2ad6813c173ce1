"""qconv2d on a direct oneDNN primitive kept per layer (ipexconvert.dnnl): uint8 activations,
int8 weights with per-channel scales, bias, and a ReLU and/or a residual sum fused; uint8,
bfloat16 or float32 output. A uint8 residual goes into a uint8 output in its own scale and zero
point; into a float output (ResNet's last block) it is dequantized to the output's dtype first
and summed as a float residual (by the native dequantize kernel: at [16, 2048, 7, 7], 0.33 ms
against 3.8 ms for torch's three ops, bit-identical). A float residual needs an output of its dtype.
"""
from __future__ import annotations

from typing import Optional

import torch

from ... import dnnl, native
from ...ir.ops._quant import dequantize
from ..kernels import Kernel, NodeContext, register_kernel
from ..native_kernels._common import dense_view
from ._common import enabled, int8_allowed, int8_output, int8_weight_params
from ._dnnl_conv import check_conv_constants, conv_kernel, fusable, same_shape

_OUTPUTS = frozenset({"uint8", "bfloat16", "float32"})


@register_kernel("cpu", "qconv2d")
def qconv2d_dnnl(ctx: NodeContext) -> Optional[Kernel]:
    a, x, out = ctx.attrs, ctx.input_specs[0], ctx.output_specs[0]
    if (ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa) or x.dtype != "uint8" or x.rank != 4
            or a.groups != 1 or a.output_dtype not in _OUTPUTS or not dnnl.usable(ctx.isa)):
        return None
    params = int8_weight_params(ctx)
    if params is None:
        return None
    check_conv_constants(ctx, "dnnl:qconv2d", bias_slot=3, scales_slot=2)
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
    conv = dnnl.make_layer("dnnl:qconv2d", dnnl.raw.Conv, weight.contiguous(), scales, bias, tuple(a.stride),
                           tuple(a.padding), tuple(a.dilation), "uint8", a.output_dtype, relu=plan.relu, sum=summed,
                           sum_scale=a.accum_scale if in_own_scale else 1.0,
                           sum_zero_point=a.accum_zero_point if in_own_scale else 0,
                           x_scale=a.x_scale, x_zero_point=a.x_zero_point, y_scale=a.output_scale,
                           y_zero_point=a.output_zero_point)
    return conv_kernel(conv, weight.shape, a, out_dtype, out, plan.sum_operand, "dnnl:qconv2d",
                       frozenset({1, 2, 3}), residual)


def _float_residual(scale: float, zero_point: int, out_dtype: torch.dtype, isa: str):
    """uint8 residual -> (r - zero_point) * scale in out_dtype, channels-last (the buffer oneDNN sums into)."""
    scales, zero_points = torch.tensor([scale], dtype=torch.float32), torch.tensor([zero_point], dtype=torch.int32)
    lib = native.raw if native.available() else None

    def residual(t: torch.Tensor) -> torch.Tensor:
        if lib is None or not t.is_contiguous(memory_format=torch.channels_last):
            return dequantize(t, scale, zero_point).to(out_dtype).contiguous(memory_format=torch.channels_last)
        nhwc, back = dense_view(t)
        out = torch.empty(nhwc.shape, dtype=out_dtype)
        lib.dequantize(nhwc, scales, zero_points, False, out, isa, torch.get_num_threads())
        return back(out)  # channels-last again

    return residual
