"""add_layer_norm on the GPU. Factories in preference order:

triton: one Triton kernel (_triton_layer_norm.py): the sum, written out when the node returns it, the
norm, and the codes when the node quantizes its result, in one pass over the row.

torch_cuda: the sum, then torch's fused CUDA layer norm on the activations' dtype (two kernels; the
reference launches six for bf16).

A quantizing node that Triton cannot take runs the reference."""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F

from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton_layer_norm
from ._triton import triton_missing
from ._norm import affine_slots, constant_affine


def _takes(ctx: NodeContext, quantizing: bool = False):
    """(weight, bias) when a GPU kernel takes this node (quantizing: one that can also quantize), else None."""
    if (ctx.attrs.quantize is not None and not quantizing) or ctx.input_specs[0].dtype != ctx.input_specs[1].dtype:
        return None
    if ctx.attrs.quantize is not None and len(ctx.input_specs) > 4 and ctx.constants[4] is None:
        return None  # a computed multiplier
    return constant_affine(ctx, 2)


@register_kernel("cuda", "add_layer_norm", runs_at=triton_missing)
def triton_add_layer_norm(ctx: NodeContext) -> Optional[Kernel]:
    """The sum, the norm and the codes for a following int8 layer in one Triton kernel (rows up to 16384 wide,
    one norm dim)."""
    attrs, affine = ctx.attrs, _takes(ctx, quantizing=True)
    shape = ctx.input_specs[0].shape
    if (affine is None or len(attrs.normalized_shape) != 1 or not isinstance(shape[-1], int)
            or shape[-1] > _triton_layer_norm.MAX_COLUMNS or ctx.input_specs[0].shape != ctx.input_specs[1].shape):
        return None
    weight, bias = affine
    multiplier = ctx.constants[4] if attrs.quantize is not None and len(ctx.constants) > 4 else None
    multiplier = None if multiplier is None else multiplier.float().contiguous()
    consumed = affine_slots(ctx, 2) | ({4} if multiplier is not None else set())

    def run(inputs: list, dims: dict[str, int]):
        return _triton_layer_norm.add_layer_norm(inputs[0], inputs[1], weight, bias, attrs.eps, attrs.return_sum,
                                                 attrs.quantize, multiplier)

    return Kernel(run, "triton:add_layer_norm", consumed, fresh_output=True)


@register_kernel("cuda", "add_layer_norm")
def torch_cuda_add_layer_norm(ctx: NodeContext) -> Optional[Kernel]:
    """The sum, then torch's CUDA layer norm."""
    attrs, affine = ctx.attrs, _takes(ctx)
    if affine is None:
        return None
    weight, bias = affine

    def run(inputs: list, dims: dict[str, int]):
        total = inputs[0] + inputs[1]
        y = F.layer_norm(total, attrs.normalized_shape, weight, bias, attrs.eps)
        return (y, total) if attrs.return_sum else y

    return Kernel(run, "torch_cuda:add_layer_norm", affine_slots(ctx, 2), fresh_output=True)
