"""max_pool2d on the GPU. Factories in preference order:

triton: integer codes in channels-last memory pooled by one Triton kernel (_triton_jit.max_pool_codes), read once
and written once.

torch: torch's CUDA max pooling, which has no uint8/int8 kernel: a max is exact on the codes in float16 (every
8-bit code is exact there) and in any layout, so integer codes pool in float16 and go back (three passes over
float16 copies). Float inputs run torch's kernel directly (channels-last stays channels-last)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing

_LOWEST = {torch.uint8: 0, torch.int8: -128}


@register_kernel("cuda", "max_pool2d", runs_at=triton_missing)
def triton_max_pool2d(ctx: NodeContext) -> Optional[Kernel]:
    """Codes [N, C, H, W] in channels-last memory; other inputs take the torch path."""
    a = ctx.attrs
    fallback = torch_cuda_max_pool2d(ctx)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if x.dtype not in _LOWEST or x.dim() != 4 or not x.is_contiguous(memory_format=torch.channels_last):
            return fallback.fn(inputs, dims)
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = a.kernel_size, a.stride, a.padding, a.dilation
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        out = torch.empty((n, c, oh, ow), dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
        rows = n * oh * ow
        if rows and c:
            block_c = min(128, max(16, 1 << (c - 1).bit_length()))
            block_p = max(1, 2048 // block_c)
            _triton.jit().max_pool_codes[((rows + block_p - 1) // block_p, (c + block_c - 1) // block_c)](
                x, out, rows, c, h, w, oh, ow, sh, sw, ph, pw, dh, dw, _LOWEST[x.dtype], KH=kh, KW=kw,
                BLOCK_P=block_p, BLOCK_C=block_c, num_warps=4)
        return out

    return Kernel(run, "triton:max_pool2d_codes", fresh_output=True)


@register_kernel("cuda", "max_pool2d")
def torch_cuda_max_pool2d(ctx: NodeContext) -> Optional[Kernel]:
    a = ctx.attrs

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if x.is_floating_point():
            return F.max_pool2d(x, a.kernel_size, a.stride, a.padding, a.dilation)
        return F.max_pool2d(x.half(), a.kernel_size, a.stride, a.padding, a.dilation).to(x.dtype)

    return Kernel(run, "torch_cuda:max_pool2d", fresh_output=True)
