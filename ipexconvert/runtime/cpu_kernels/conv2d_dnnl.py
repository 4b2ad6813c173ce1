"""conv2d (float32, bfloat16) on a direct oneDNN primitive kept per layer (ipexconvert.dnnl), with
bias, a ReLU and/or a residual sum (an operand of the output's shape and dtype) fused. Other
post-ops, groups > 1 and a CPU without native bf16 go to conv2d_onednn.py."""
from __future__ import annotations

from typing import Optional

from ... import dnnl
from ..kernels import Kernel, NodeContext, register_kernel
from ._common import consumed, constant_weight_and_bias, enabled, isa_allows, node_dtype
from ._dnnl_conv import check_conv_constants, conv_kernel, fusable, same_shape


@register_kernel("cpu", "conv2d")
def conv2d_dnnl(ctx: NodeContext) -> Optional[Kernel]:
    a, x, out = ctx.attrs, ctx.input_specs[0], ctx.output_specs[0]
    dtype = node_dtype(ctx)
    if (ctx.device != "cpu" or not enabled() or ctx.nan_safe or dtype is None or x.rank != 4 or a.groups != 1
            or not isa_allows(ctx.isa, dtype) or not dnnl.usable(ctx.isa)):
        return None
    params = constant_weight_and_bias(ctx)
    if params is None:
        return None
    check_conv_constants(ctx, "dnnl:conv2d", bias_slot=2)

    def operand_ok(slot: int) -> bool:
        operand = ctx.input_specs[slot]
        return operand is not None and operand.dtype == dtype and same_shape(operand, out)

    plan = fusable(a.post_ops, operand_ok)
    if plan is None:
        return None
    weight, bias = params
    torch_dtype = weight.dtype
    conv = dnnl.make_layer("dnnl:conv2d", dnnl.raw.Conv, weight.contiguous(), None,
                           None if bias is None else bias.float().contiguous(), tuple(a.stride), tuple(a.padding),
                           tuple(a.dilation), dtype, dtype, relu=plan.relu, sum=plan.sum_operand is not None)
    return conv_kernel(conv, weight.shape, a, torch_dtype, out, plan.sum_operand, "dnnl:conv2d", consumed(ctx))
