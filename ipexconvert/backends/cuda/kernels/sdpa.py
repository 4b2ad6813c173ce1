"""sdpa on the GPU: torch's attention (flash / memory-efficient / cuDNN, torch picks per shape), with the
fully-masked-row rule applied without asking the GPU whether any row is fully masked (a captured graph
cannot read back): the fill always runs, writing the heads-last layout the next reshape wants. The mask's cast to the activations' dtype and which rows it
removes are found once per mask tensor: every layer of an encoder reads the same mask, so the other
layers reuse the first one's."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.sdpa import attention, fully_masked_rows, quantize_output
from ....runtime.kernels import Kernel, NodeContext, register_kernel

# (the last mask seen, it in the activations' dtype, its fully masked rows). Holding the mask keeps its
# identity from being reused by another tensor, so `is` is an exact test; one entry, since a plan reads one
# mask in all its layers.
_last_mask: tuple = (None, None, None)


def _prepared(mask: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    global _last_mask
    seen, cast, rows = _last_mask
    if seen is not mask or (cast.dtype != dtype and mask.dtype != torch.bool):
        cast = mask if mask.dtype in (torch.bool, dtype) else mask.to(dtype)
        rows = fully_masked_rows(mask)
        _last_mask = (mask, cast, rows)
    return cast, rows


@register_kernel("cuda", "sdpa")
def torch_cuda_sdpa(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs

    def run(inputs: list, dims: dict[str, int]):
        q, k, v, mask = inputs[:4]
        if mask is None:
            return quantize_output(attention(inputs, attrs), inputs, attrs)
        cast, removed = _prepared(mask, q.dtype)
        y = attention([q, k, v, cast], attrs)
        if y.dim() != 4:
            return quantize_output(y.masked_fill_(removed, 0), inputs, attrs)
        # The fill writes [batch, q_len, heads, head_dim] memory (viewed as y's shape): the layout the
        # heads are merged in next, so that reshape is a view instead of another copy.
        b, h, length, e = y.shape
        out = torch.empty((b, length, h, e), dtype=y.dtype, device=y.device).transpose(1, 2)
        torch.where(removed, y.new_zeros(()), y, out=out)
        return quantize_output(out, inputs, attrs)

    return Kernel(run, "torch_cuda:sdpa")
