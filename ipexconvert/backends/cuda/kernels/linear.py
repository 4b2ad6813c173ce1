"""linear on the GPU where its one post-op adds a residual of the output's shape (a decoder's o and down
projections, an encoder's output projections): one addmm, the residual read as the GEMM's C (out = residual +
x @ W^T, accumulated in float32 and rounded once), where the reference launches the GEMM and then an add; summed
into the residual's memory where nothing reads it after (the executor's in-place variant). Every
other linear runs the reference (F.linear on cuBLAS, then its post-ops)."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops._common import same_shape
from ....runtime.kernels import Kernel, NodeContext, register_kernel


@register_kernel("cuda", "linear")
def torch_cuda_linear_add(ctx: NodeContext) -> Optional[Kernel]:
    post_ops = ctx.attrs.post_ops
    if len(post_ops) != 1 or post_ops[0].kind != "add" or post_ops[0].operand is None or ctx.input_specs[2] is not None:
        return None
    residual_at, out = post_ops[0].operand, ctx.output_specs[0]
    residual = ctx.input_specs[residual_at]
    if residual.dtype != out.dtype or not same_shape(residual.shape, out.shape):
        return None  # a broadcast operand: the reference's add

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x, weight, r = inputs[0], inputs[1], inputs[residual_at]
        y = torch.addmm(r.reshape(-1, r.shape[-1]), x.reshape(-1, x.shape[-1]), weight.t())
        return y.view(*x.shape[:-1], weight.shape[0])

    def accumulate_in_place(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        """The GEMM summed into the residual's own memory (addmm copies it into a new tensor first)."""
        x, weight, r = inputs[0], inputs[1], inputs[residual_at]
        if not r.is_contiguous():
            return run(inputs, dims)
        r.view(-1, r.shape[-1]).addmm_(x.reshape(-1, x.shape[-1]), weight.t())
        return r

    return Kernel(run, "torch_cuda:linear_addmm_residual", fresh_output=True,
                  in_place=(residual_at, accumulate_in_place))
