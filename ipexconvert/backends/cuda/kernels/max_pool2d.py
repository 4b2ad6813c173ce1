"""max_pool2d on the GPU. torch's CUDA max pooling has no uint8/int8 kernel; a max is exact on the codes in
float16 (every 8-bit code is exact there) and in any layout, so integer codes pool in float16 and go back.
Float inputs run torch's kernel directly (channels-last stays channels-last)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....runtime.kernels import Kernel, NodeContext, register_kernel


@register_kernel("cuda", "max_pool2d")
def torch_cuda_max_pool2d(ctx: NodeContext) -> Optional[Kernel]:
    a = ctx.attrs

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if x.is_floating_point():
            return F.max_pool2d(x, a.kernel_size, a.stride, a.padding, a.dilation)
        return F.max_pool2d(x.half(), a.kernel_size, a.stride, a.padding, a.dilation).to(x.dtype)

    return Kernel(run, "torch_cuda:max_pool2d", fresh_output=True)
