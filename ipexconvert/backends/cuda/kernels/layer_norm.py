"""layer_norm on the GPU: torch's fused CUDA layer norm on the activations' own dtype (it accumulates in
float32 and rounds once, as the reference's float32 round trip does), weights cast once at load: one
kernel where the reference launches five for bf16."""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F

from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ._norm import constant_affine


@register_kernel("cuda", "layer_norm")
def torch_cuda_layer_norm(ctx: NodeContext) -> Optional[Kernel]:
    affine = constant_affine(ctx, 1)
    if affine is None:
        return None
    weight, bias = affine
    shape, eps = ctx.attrs.normalized_shape, ctx.attrs.eps

    def run(inputs: list, dims: dict[str, int]):
        return F.layer_norm(inputs[0], shape, weight, bias, eps)

    return Kernel(run, "torch_cuda:layer_norm", frozenset(i for i in (1, 2) if ctx.input_specs[i] is not None),
                  fresh_output=True)
