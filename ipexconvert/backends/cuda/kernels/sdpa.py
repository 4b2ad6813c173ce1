"""sdpa on the GPU: torch's attention (flash / memory-efficient / cuDNN, torch picks per shape), with the
fully-masked-row rule applied without asking the GPU whether any row is fully masked (a captured graph
cannot read back): the fill always runs. Which rows a mask removes is found once per mask tensor: every
layer of an encoder reads the same mask, so the other layers reuse the first one's answer."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.sdpa import attention, fully_masked_rows, quantize_output
from ....runtime.kernels import Kernel, NodeContext, register_kernel

# (the last mask seen, its fully masked rows). Holding the mask keeps its identity from being reused by
# another tensor, so `is` is an exact test; one entry, since a plan reads one mask in all its layers.
_last_mask: tuple = (None, None)


def _removed_rows(mask: torch.Tensor) -> torch.Tensor:
    global _last_mask
    seen, rows = _last_mask
    if seen is not mask:
        rows = fully_masked_rows(mask)
        _last_mask = (mask, rows)
    return rows


@register_kernel("cuda", "sdpa")
def torch_cuda_sdpa(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs

    def run(inputs: list, dims: dict[str, int]):
        y = attention(inputs, attrs)
        if inputs[3] is not None:
            y = y.masked_fill(_removed_rows(inputs[3]), 0)
        return quantize_output(y, inputs, attrs)

    return Kernel(run, "torch_cuda:sdpa")
