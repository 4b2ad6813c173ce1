"""sdpa on the GPU: torch's attention (flash / memory-efficient / cuDNN, torch picks per shape), with the
fully-masked-row rule applied without asking the GPU whether any row is fully masked (a captured graph
cannot read back): the fill always runs, writing the heads-last layout the next reshape wants. The mask's cast to the activations' dtype and which rows it
removes are found once per mask tensor and run (run_scope.py): every layer of an encoder reads the same
mask, so the other layers reuse the first one's."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.sdpa import attention, fully_masked_rows, quantize_output
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import run_scope
from . import _triton_int8
from ._triton import triton_missing

# (the last mask seen, the activations' dtype, the run it was seen in (run_scope.py), then what _prepared
# returns). Holding the mask keeps its identity from being reused by another tensor, so `is` is an exact
# test within a run; one entry, since a plan reads one mask in all its layers.
_last_mask: tuple = (None, None, 0, None)


def _prepared(mask: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the mask in the activations' dtype, its fully masked rows, a zero of that dtype on the GPU)."""
    global _last_mask
    seen, seen_dtype, seen_run, prepared = _last_mask
    if seen is not mask or seen_dtype != dtype or seen_run != run_scope.current():
        cast = mask if mask.dtype in (torch.bool, dtype) else mask.to(dtype)
        prepared = (cast, fully_masked_rows(mask), torch.zeros((), dtype=dtype, device=mask.device))
        _last_mask = (mask, dtype, run_scope.current(), prepared)
    return prepared


@register_kernel("cuda", "sdpa")
def torch_cuda_sdpa(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    fast_quantize = triton_missing(ctx.isa) is None  # a quantizing node's codes through Triton (_triton_int8.py)

    def run(inputs: list, dims: dict[str, int]):
        q, k, v, mask = inputs[:4]
        if mask is None:
            return quantize_output(attention(inputs, attrs), inputs, attrs)
        cast, removed, zero = _prepared(mask, q.dtype)
        y = attention([q, k, v, cast], attrs)
        if y.dim() != 4:
            return quantize_output(y.masked_fill_(removed, 0), inputs, attrs)
        # The fill writes [batch, q_len, heads, head_dim] memory (viewed as y's shape): the layout the
        # heads are merged in next, so that reshape is a view instead of another copy.
        b, h, length, e = y.shape
        out = torch.empty((b, length, h, e), dtype=y.dtype, device=y.device).transpose(1, 2)
        torch.where(removed, zero, y, out=out)
        if attrs.quantize is not None and fast_quantize:  # the codes in the same heads-last memory, one kernel
            qa, multiplier = attrs.quantize, inputs[4] if len(inputs) > 4 else None
            codes = _triton_int8.run_quantize(out.transpose(1, 2), qa.scale, qa.zero_point, qa.dtype,
                                              None if multiplier is None else multiplier.float(), h * e)
            return codes.transpose(1, 2)
        return quantize_output(out, inputs, attrs)

    return Kernel(run, "torch_cuda:sdpa")
