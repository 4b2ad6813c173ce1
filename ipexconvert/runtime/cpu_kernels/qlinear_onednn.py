"""qlinear through oneDNN int8 (VNNI/AMX): weight packed once at load, bias and one unary post-op fused.

torch.ops.onednn.qlinear_pointwise takes the uint8 activation with its per-tensor scale and
zero point, the packed int8 weight with per-channel scales, and returns float32, bfloat16
or (requantized) uint8. Post-ops beyond the first unary run in torch after the call; a uint8
node with such a tail (a SmoothQuant multiplier folded in by fold_requantize) computes in
float32 and is quantized after the tail.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels import Kernel, NodeContext, register_kernel
from . import probe
from ...ir.ops._quant import quantize
from ._common import plan_post_ops, qlinear_setup, with_tail


@register_kernel("cpu", "qlinear")
def qlinear_onednn(ctx: NodeContext) -> Optional[Kernel]:
    setup = qlinear_setup(ctx)
    prepack = probe.op_for("onednn.qlinear_prepack", "int8")
    qlinear = probe.op_for("onednn.qlinear_pointwise", "int8")
    if setup is None or prepack is None or qlinear is None or ctx.input_specs[0].rank < 2:
        return None
    (weight, scales, bias), out_dtype = setup
    a = ctx.attrs
    plan = plan_post_ops(a.post_ops, lambda p: False, frozenset())
    packed = prepack(weight.contiguous(), None)
    zero_points = torch.zeros(weight.shape[0], dtype=torch.int64)
    attr, algorithm = plan.unary or ("none", "")
    requantize_after_tail = bool(plan.tail) and out_dtype is None
    call_dtype = torch.float32 if requantize_after_tail else out_dtype
    out_scale, out_zero_point = (1.0, 0) if requantize_after_tail else (a.output_scale, a.output_zero_point)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return qlinear(inputs[0], a.x_scale, a.x_zero_point, packed, scales, zero_points, bias,
                       out_scale, out_zero_point, call_dtype, attr, [], algorithm)

    fused = with_tail(run, plan.tail)
    if not requantize_after_tail:
        return Kernel(fused, "onednn:qlinear", frozenset({1, 2, 3}))

    def requantized(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return quantize(fused(inputs, dims), a.output_scale, a.output_zero_point, a.output_dtype)

    return Kernel(requantized, "onednn:qlinear", frozenset({1, 2, 3}))
