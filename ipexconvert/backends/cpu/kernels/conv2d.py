"""conv2d on the CPU. Factories in preference order: onednn_direct (our oneDNN primitive per layer),
then torch_onednn (torch's oneDNN operator); the op's reference runs when both decline.

onednn_direct:
  conv2d (float32, bfloat16) on a direct oneDNN primitive kept per layer (ipexconvert.backends.cpu.onednn_direct), with
  bias, a ReLU and/or a residual sum (an operand of the output's shape and dtype) fused. Other
  post-ops, groups > 1 and a CPU without native bf16 go to torch_onednn_conv2d.py.

torch_onednn:
  conv2d through oneDNN: weight packed once at load, bias and post-ops fused into the call.

  torch.ops.mkldnn._convolution_pointwise runs the convolution with one fused unary
  post-op; its .binary overload fuses an add/mul of another tensor and, for add, a
  following relu (ResNet's "residual add, then relu"), for groups=1 only. Post-ops
  beyond what oneDNN takes run in torch after the call.

  Note the argument order: padding, stride, dilation (F.conv2d has stride first).
"""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.dims import same
from ....ir.postops import PostOp
from ....ir.spec import TensorSpec
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import onednn_direct
from ..self_check import torch_ops
from ._onednn_direct_conv import check_conv_constants, conv_kernel, fusable, same_shape
from ._torch_onednn import (constant_weight_and_bias, consumed, enabled, isa_allows, node_dtype, plan_post_ops,
                            representative_conv_input, with_tail)
from . import _runs_at

@register_kernel("cpu", "conv2d", runs_at=_runs_at.onednn_direct_float)
def onednn_direct_conv2d(ctx: NodeContext) -> Optional[Kernel]:
    """Our oneDNN convolution primitive per layer and input size: float32 / bfloat16, groups 1, post-ops [], relu,
    a same-shape residual sum (+relu); weights reordered once."""
    a, x, out = ctx.attrs, ctx.input_specs[0], ctx.output_specs[0]
    dtype = node_dtype(ctx)
    if (ctx.device != "cpu" or not enabled() or ctx.nan_safe or dtype is None or x.rank != 4 or a.groups != 1
            or not isa_allows(ctx.isa, dtype) or not onednn_direct.usable(ctx.isa)):
        return None
    params = constant_weight_and_bias(ctx)
    if params is None:
        return None
    check_conv_constants(ctx, "onednn_direct:conv2d", bias_slot=2)

    def operand_ok(slot: int) -> bool:
        operand = ctx.input_specs[slot]
        return operand is not None and operand.dtype == dtype and same_shape(operand, out)

    plan = fusable(a.post_ops, operand_ok)
    if plan is None:
        return None
    weight, bias = params
    torch_dtype = weight.dtype
    conv = onednn_direct.make_layer("onednn_direct:conv2d", onednn_direct.raw.Conv, weight.contiguous(), None,
                           None if bias is None else bias.float().contiguous(), tuple(a.stride), tuple(a.padding),
                           tuple(a.dilation), dtype, dtype, relu=plan.relu, sum=plan.sum_operand is not None)
    return conv_kernel(conv, weight.shape, a, torch_dtype, out, plan.sum_operand, "onednn_direct:conv2d", consumed(ctx),
                       measure_shapes=dtype == "bfloat16")


_BINARY_KINDS = frozenset({"add", "mul"})
# The .binary op refuses other unary post-ops after the binary ("Unary Fusion behavior undefined").
_UNARY_AFTER_ADD = frozenset({"relu"})


def _operand_fits(operand: TensorSpec, out: TensorSpec, dtype: str) -> bool:
    """Operand shapes oneDNN's conv binary post-op takes: the full output, per-channel [1|N, C, 1, 1], or a scalar.

    (The broadcast forms Inductor fuses; a lower-rank operand is viewed as rank 4 first.)
    """
    if operand.dtype != dtype or operand.rank > 4:
        return False
    shape = [1] * (4 - operand.rank) + list(operand.shape)
    if all(same(a, b) for a, b in zip(shape, out.shape)) or shape == [1, 1, 1, 1]:
        return True
    return (shape[2] == 1 and shape[3] == 1 and same(shape[1], out.shape[1])
            and (shape[0] == 1 or same(shape[0], out.shape[0])))


@register_kernel("cpu", "conv2d", runs_at=_runs_at.torch_onednn_float)
def torch_onednn_conv2d(ctx: NodeContext) -> Optional[Kernel]:
    """torch's mkldnn._convolution_pointwise (+.binary for a fused residual add/mul, optionally followed by relu):
    float32 or bfloat16 (native bf16 only), constant weight reordered once; other post-ops in torch after the call."""
    if ctx.device != "cpu" or not enabled() or ctx.nan_safe:
        return None
    dtype = node_dtype(ctx)
    params = constant_weight_and_bias(ctx)
    if dtype is None or params is None or not isa_allows(ctx.isa, dtype):
        return None
    weight, bias = params
    x_spec, out_spec = ctx.input_specs[0], ctx.output_specs[0]
    if x_spec.rank != 4 or weight.dim() != 4:
        return None
    conv = torch_ops.op_for("mkldnn._convolution_pointwise", dtype)
    reorder = torch_ops.op_for("mkldnn._reorder_convolution_weight", dtype)
    if conv is None or reorder is None:
        return None
    binary_op = torch_ops.op_for("mkldnn._convolution_pointwise.binary", dtype)

    a = ctx.attrs

    def binary_ok(p: PostOp) -> bool:
        # With groups > 1 the .binary op runs an unfused fallback (conv, then add_relu_, which fails in bf16).
        return (binary_op is not None and a.groups == 1 and p.kind in _BINARY_KINDS
                and _operand_fits(ctx.input_specs[p.operand], out_spec, dtype))

    plan = plan_post_ops(a.post_ops, binary_ok, _UNARY_AFTER_ADD)
    padding, stride, dilation, groups = list(a.padding), list(a.stride), list(a.dilation), a.groups
    packed = reorder(weight, padding, stride, dilation, groups, representative_conv_input(x_spec))
    # With a packed weight oneDNN returns channels-last even for a contiguous input: give the spec's layout.
    layout = torch.channels_last if out_spec.memory_format == "channels_last" else torch.contiguous_format

    if plan.binary is None:
        attr, algorithm = plan.unary or ("none", "")

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            y = conv(inputs[0], packed, bias, padding, stride, dilation, groups, attr, [], algorithm)
            return y.contiguous(memory_format=layout)
    else:
        slot, kind = plan.binary.operand, plan.binary.kind
        unary_attr, unary_algorithm = plan.binary_unary or (None, None)
        lead = (1,) * (4 - ctx.input_specs[slot].rank)  # leading 1s that make the operand rank 4

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            other = inputs[slot]
            if lead:
                other = other.reshape(*lead, *other.shape)
            y = binary_op(inputs[0], other, packed, bias, padding, stride, dilation, groups,
                          kind, 1.0, unary_attr, [], unary_algorithm)
            return y.contiguous(memory_format=layout)

    return Kernel(with_tail(run, plan.tail), "torch_onednn:conv2d", consumed(ctx), keeps_nan=False)
