"""qlinear on a direct oneDNN matmul primitive kept per layer and row count (ipexconvert.dnnl):
uint8 activations, int8 weights with per-output-feature scales, bias, the first unary post-op and
a constant per-feature mul after it (a SmoothQuant multiplier fold_requantize moved here) fused;
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
from ...ir import dtypes
from ..kernels import Kernel, NodeContext, register_kernel
from ._common import qlinear_setup
from ._dnnl_linear import fused_prefix, linear_run


def fold_input_zero_point(weight: torch.Tensor, scales: torch.Tensor, bias: Optional[torch.Tensor], x_scale: float,
                          x_zero_point: int) -> tuple[Optional[torch.Tensor], int]:
    """(bias, input zero point) for the primitive, with the zero point folded into the bias.

    x_scale * sum_k (q_x - zp) * w_scale[n] * q_w[n, k] + bias[n] is the zero-point-free product plus
    bias[n] - x_scale * w_scale[n] * zp * sum_k q_w[n, k], a constant per output. oneDNN then skips its
    per-call zero-point compensation: 0.94-0.995 of the time at BERT-base shapes, same process, same
    error against a float64 reference (docs/native.md). The uncentred int32 sums (at most
    3072 * 255 * 127 here) round to fp32 with an error far below the quantization noise."""
    if not x_zero_point:
        return bias, 0
    shift = x_scale * scales.double() * x_zero_point * weight.double().sum(dim=1)
    return ((0.0 if bias is None else bias.double()) - shift).float().contiguous(), 0


def _check_constants(ctx: NodeContext) -> None:
    """The weight [N, K], its scales and bias [N] as the specs declare them, K the input's last dim
    and N the output's (dnnl.check_constant)."""
    x, out, weight = ctx.input_specs[0], ctx.output_specs[0], ctx.constants[1]
    dnnl.check_constant("dnnl:qlinear", ctx, 1, "weight", [dnnl.static(out.shape[-1]), dnnl.static(x.shape[-1])])
    for slot, what in ((2, "w_scales"), (3, "bias")):
        if ctx.input_specs[slot] is not None:
            dnnl.check_constant("dnnl:qlinear", ctx, slot, what, [weight.shape[0]])


@register_kernel("cpu", "qlinear")
def qlinear_dnnl(ctx: NodeContext) -> Optional[Kernel]:
    setup = qlinear_setup(ctx)
    if setup is None or not dnnl.usable(ctx.isa):
        return None
    (weight, scales, bias), _ = setup
    a = ctx.attrs
    _check_constants(ctx)
    fused = fused_prefix(a.post_ops, ctx.constants, weight.shape[0])
    if fused.tail and a.output_dtype == "uint8":
        return None
    bias, x_zero_point = fold_input_zero_point(weight, scales, bias, a.x_scale, a.x_zero_point)
    linear = dnnl.make_layer("dnnl:qlinear", dnnl.raw.Linear, weight.contiguous(), scales, bias, "uint8",
                             a.output_dtype, post_op=fused.unary, multiplier=fused.multiplier, x_scale=a.x_scale,
                             x_zero_point=x_zero_point, y_scale=a.output_scale, y_zero_point=a.output_zero_point)
    run = linear_run(linear, dtypes.to_torch(a.output_dtype), fused.tail, "dnnl:qlinear")
    held = {1, 2, 3} if fused.multiplier_slot is None else {1, 2, 3, fused.multiplier_slot}
    return Kernel(run, "dnnl:qlinear", frozenset(held), fresh_output=True)
