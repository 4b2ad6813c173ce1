"""layer_norm on the GPU. Factories in preference order:

triton: the Triton row kernel of add_layer_norm (_triton_layer_norm.py) without the residual.

torch_cuda: torch's fused CUDA layer norm on the activations' own dtype (it accumulates in float32 and
rounds once, as the reference's float32 round trip does), weights cast once at load: one kernel where the
reference launches five for bf16."""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F

from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton_layer_norm
from ._triton import triton_missing
from ._norm import affine_slots, constant_affine


@register_kernel("cuda", "layer_norm", runs_at=triton_missing)
def triton_layer_norm(ctx: NodeContext) -> Optional[Kernel]:
    """One Triton kernel (rows up to 16384 wide, one norm dim)."""
    affine, attrs, shape = constant_affine(ctx, 1), ctx.attrs, ctx.input_specs[0].shape
    if (affine is None or len(attrs.normalized_shape) != 1 or not isinstance(shape[-1], int)
            or shape[-1] > _triton_layer_norm.MAX_COLUMNS):
        return None
    weight, bias = affine

    def run(inputs: list, dims: dict[str, int]):
        return _triton_layer_norm.add_layer_norm(inputs[0], None, weight, bias, attrs.eps, False)

    return Kernel(run, "triton:layer_norm", affine_slots(ctx, 1), fresh_output=True)


@register_kernel("cuda", "layer_norm")
def torch_cuda_layer_norm(ctx: NodeContext) -> Optional[Kernel]:
    """torch's CUDA layer norm."""
    affine = constant_affine(ctx, 1)
    if affine is None:
        return None
    weight, bias = affine
    shape, eps = ctx.attrs.normalized_shape, ctx.attrs.eps

    def run(inputs: list, dims: dict[str, int]):
        return F.layer_norm(inputs[0], shape, weight, bias, eps)

    return Kernel(run, "torch_cuda:layer_norm", affine_slots(ctx, 1), fresh_output=True)
