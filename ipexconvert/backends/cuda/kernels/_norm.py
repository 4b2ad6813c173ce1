"""What the GPU's layer_norm and add_layer_norm share."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir import dtypes
from ....runtime.kernels import NodeContext


def constant_affine(ctx: NodeContext, first: int) -> Optional[tuple[Optional[torch.Tensor], Optional[torch.Tensor]]]:
    """(weight, bias) of a norm node in its activations' dtype, each constant or absent; None when either is
    computed (then the reference runs)."""
    dtype = dtypes.to_torch(ctx.input_specs[0].dtype)
    affine = []
    for i in (first, first + 1):
        if ctx.input_specs[i] is None:
            affine.append(None)
        elif ctx.constants[i] is None:
            return None
        else:
            affine.append(ctx.constants[i].to(dtype))
    return affine[0], affine[1]


def affine_slots(ctx: NodeContext, first: int) -> frozenset[int]:
    """The node inputs holding the weight and bias (which the kernel keeps, cast, in place of the originals)."""
    return frozenset(i for i in (first, first + 1) if ctx.input_specs[i] is not None)
