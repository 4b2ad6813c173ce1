"""qlinear through oneDNN int8 (VNNI/AMX): weight packed once at load, bias and one unary post-op fused.

torch.ops.onednn.qlinear_pointwise takes the uint8 activation with its per-tensor scale and
zero point, the packed int8 weight with per-channel scales, and returns float32, bfloat16
or (requantized) uint8. Post-ops beyond the first unary run in torch after the call, which
is only possible for a float output; a requantized node with such a tail goes to the reference.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels import Kernel, NodeContext, register_kernel
from . import probe
from ._common import enabled, int8_allowed, int8_output, int8_weight_params, plan_post_ops, with_tail


def qlinear_setup(ctx: NodeContext):
    """(weight params, output dtype arg, fusion plan) or None when oneDNN cannot run this node."""
    if ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa):
        return None
    params = int8_weight_params(ctx)
    out_dtype = int8_output(ctx.attrs)
    if params is None or out_dtype == "unsupported" or ctx.input_specs[0].dtype != "uint8":
        return None
    plan = plan_post_ops(ctx.attrs.post_ops, lambda p: False, frozenset())
    if plan.tail and out_dtype is None:
        return None
    return params, out_dtype, plan


@register_kernel("cpu", "qlinear")
def qlinear_onednn(ctx: NodeContext) -> Optional[Kernel]:
    setup = qlinear_setup(ctx)
    prepack = probe.op_for("onednn.qlinear_prepack", "int8")
    qlinear = probe.op_for("onednn.qlinear_pointwise", "int8")
    if setup is None or prepack is None or qlinear is None or ctx.input_specs[0].rank < 2:
        return None
    (weight, scales, bias), out_dtype, plan = setup
    a = ctx.attrs
    packed = prepack(weight.contiguous(), None)
    zero_points = torch.zeros(weight.shape[0], dtype=torch.int64)
    attr, algorithm = plan.unary or ("none", "")

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return qlinear(inputs[0], a.x_scale, a.x_zero_point, packed, scales, zero_points, bias,
                       a.output_scale, a.output_zero_point, out_dtype, attr, [], algorithm)

    return Kernel(with_tail(run, plan.tail), "onednn:qlinear", frozenset({1, 2, 3}))
