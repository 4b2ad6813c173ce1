"""qlinear on a direct oneDNN matmul primitive kept per layer and row count (ipexconvert.dnnl):
uint8 activations, int8 weights with per-output-feature scales; bias, a unary post-op and a
constant per-feature multiplier (the next layer's SmoothQuant factor, see fold_requantize) fused;
uint8, bfloat16 or float32 output. Other post-ops run in torch after the call, which a uint8
output cannot take: such nodes go on to qlinear_onednn.py.

Measured against torch.ops.onednn.qlinear_pointwise at BERT-base shapes, 2 threads, same process
(docs/native.md): 0.75-0.90 of its time at 128 rows, 0.4 at 1 row, where torch's per-call setup
dominates.
"""
from __future__ import annotations

from typing import Optional

import torch

from ... import dnnl
from ..kernels import Kernel, NodeContext, register_kernel
from ._common import qlinear_setup
from ._dnnl_linear import fusable, linear_run


@register_kernel("cpu", "qlinear")
def qlinear_dnnl(ctx: NodeContext) -> Optional[Kernel]:
    setup = qlinear_setup(ctx)
    if setup is None or not dnnl.usable(ctx.isa):
        return None
    (weight, scales, bias), _ = setup
    a = ctx.attrs
    plan = fusable(a.post_ops, ctx.constants, weight.shape[0])
    if plan.tail and a.output_dtype == "uint8":
        return None
    linear = dnnl.raw.Linear(weight.contiguous(), scales, bias, "uint8", a.output_dtype, post_op=plan.unary,
                             multiplier=plan.multiplier, x_scale=a.x_scale, x_zero_point=a.x_zero_point,
                             y_scale=a.output_scale, y_zero_point=a.output_zero_point)
    run = linear_run(linear, getattr(torch, a.output_dtype), plan.tail)
    held = {1, 2, 3} if plan.multiplier_slot is None else {1, 2, 3, plan.multiplier_slot}
    return Kernel(run, "dnnl:qlinear", frozenset(held), fresh_output=True)
