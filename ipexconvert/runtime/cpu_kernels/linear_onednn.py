"""linear through oneDNN (bfloat16; float32 on non-Intel CPUs): weight packed once at load, bias and post-ops fused into the call.

torch.ops.mkldnn._linear_pointwise computes x @ W^T + b with one fused unary post-op;
its .binary overload fuses an add/mul of a tensor of exactly the output's shape (it
reshapes that operand to [rows, out] itself, so it cannot broadcast) and takes no
unary after it. Post-ops beyond that run in torch after the call.

_reorder_linear_weight wants the weight as [out, in], the layout linear already
stores (prepack.py makes it contiguous). It cannot tell a transposed square weight
from the right one, so nothing here may hand it W^T.
"""
from __future__ import annotations

from typing import Optional

import torch

from ...ir.dims import same
from ...ir.postops import PostOp
from ..kernels import Kernel, NodeContext, register_kernel
from . import probe
from ._common import (consumed, constant_weight_and_bias, enabled, isa_allows, mkl_runs_float32_linear, node_dtype,
                      plan_post_ops, with_tail)

_BINARY_KINDS = frozenset({"add", "mul"})


@register_kernel("cpu", "linear")
def linear_onednn(ctx: NodeContext) -> Optional[Kernel]:
    """bf16 linear (1.4-2x over F.linear); float32 too where MKL does not run it (non-Intel CPUs:
    `_common.mkl_runs_float32_linear`)."""
    if ctx.device != "cpu" or not enabled() or ctx.nan_safe:
        return None
    dtype = node_dtype(ctx)
    if dtype == "bfloat16" or (dtype == "float32" and not mkl_runs_float32_linear()):
        return build_linear_kernel(ctx)
    return None


def build_linear_kernel(ctx: NodeContext) -> Optional[Kernel]:
    """The oneDNN linear kernel for this node (float32 or bfloat16), or None if it does not apply."""
    dtype = node_dtype(ctx)
    params = constant_weight_and_bias(ctx)
    if dtype is None or params is None or not isa_allows(ctx.isa, dtype):
        return None
    weight, bias = params
    out_spec = ctx.output_specs[0]
    if ctx.input_specs[0].rank < 2 or weight.dim() != 2:
        return None
    linear = probe.op_for("mkldnn._linear_pointwise", dtype)
    reorder = probe.op_for("mkldnn._reorder_linear_weight", dtype)
    if linear is None or reorder is None:
        return None
    binary_op = probe.op_for("mkldnn._linear_pointwise.binary", dtype)

    def binary_ok(p: PostOp) -> bool:
        operand = ctx.input_specs[p.operand]
        return (binary_op is not None and p.kind in _BINARY_KINDS and operand.dtype == dtype
                and operand.rank == out_spec.rank and all(same(a, b) for a, b in zip(operand.shape, out_spec.shape)))

    plan = plan_post_ops(ctx.attrs.post_ops, binary_ok, frozenset())
    # The packed layout does not depend on the row count enough to matter; None lets oneDNN choose.
    packed = reorder(weight.contiguous(), None)

    if plan.binary is None:
        attr, algorithm = plan.unary or ("none", "")

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            return linear(inputs[0], packed, bias, attr, [], algorithm)
    else:
        slot, kind = plan.binary.operand, plan.binary.kind

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            return binary_op(inputs[0], inputs[slot], packed, bias, kind)

    return Kernel(with_tail(run, plan.tail), "onednn:linear", consumed(ctx))
