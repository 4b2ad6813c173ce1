"""add_layer_norm on the GPU: the sum, then torch's fused CUDA layer norm on the activations' dtype (two
kernels; the reference launches six for bf16). A node that also quantizes its result runs the reference."""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F

from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ._norm import constant_affine


@register_kernel("cuda", "add_layer_norm")
def torch_cuda_add_layer_norm(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    affine = constant_affine(ctx, 2)
    if affine is None or attrs.quantize is not None or ctx.input_specs[0].dtype != ctx.input_specs[1].dtype:
        return None
    weight, bias = affine

    def run(inputs: list, dims: dict[str, int]):
        total = inputs[0] + inputs[1]
        y = F.layer_norm(total, attrs.normalized_shape, weight, bias, attrs.eps)
        return (y, total) if attrs.return_sum else y

    return Kernel(run, "torch_cuda:add_layer_norm", frozenset(i for i in (2, 3) if ctx.input_specs[i] is not None),
                  fresh_output=True)
