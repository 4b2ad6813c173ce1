"""max_pool2d on the GPU. Factories in preference order:

triton: integer codes pooled in channels-last memory by one Triton kernel (_triton_jit.max_pool_codes), read once
and written once.

torch: torch's CUDA max pooling, which has no uint8/int8 kernel: a max is exact on the codes in float16 (every
8-bit code is exact there) and in any layout, so integer codes pool in float16 and go back (three passes over
float16 copies). Float inputs run torch's kernel directly (channels-last stays channels-last)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops._common import window_output_size
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton, _triton_int8
from ._triton import triton_missing

_LOWEST = {"uint8": 0, "int8": -128}  # a padded position's code: never the max


@register_kernel("cuda", "max_pool2d", runs_at=triton_missing)
def triton_max_pool2d(ctx: NodeContext) -> Optional[Kernel]:
    """Codes [N, C, H, W] (read in channels-last memory, copied there if they are not)."""
    a, spec = ctx.attrs, ctx.input_specs[0]
    if spec.dtype not in _LOWEST or spec.rank != 4:
        return None
    lowest = _LOWEST[spec.dtype]

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = a.kernel_size, a.stride, a.padding, a.dilation
        oh, ow = window_output_size(h, kh, sh, ph, dh), window_output_size(w, kw, sw, pw, dw)
        out = torch.empty((n, c, oh, ow), dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
        rows = n * oh * ow
        if rows and c:
            block_c = min(128, max(16, _triton_int8.next_power_of_2(c)))
            block_p = max(1, 2048 // block_c)
            _triton.jit().max_pool_codes[((rows + block_p - 1) // block_p, (c + block_c - 1) // block_c)](
                x, out, rows, c, h, w, oh, ow, sh, sw, ph, pw, dh, dw, lowest, KH=kh, KW=kw,
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
