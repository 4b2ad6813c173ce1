"""sdpa on the GPU: torch's attention (flash / memory-efficient / cuDNN, torch picks per shape), with the
fully-masked-row rule applied without asking the GPU whether any row is fully masked (a captured graph
cannot read back): the fill always runs, a mask-sized reduction and one pass over the output."""
from __future__ import annotations

from typing import Optional

from ....ir.ops.sdpa import attend
from ....runtime.kernels import Kernel, NodeContext, register_kernel


@register_kernel("cuda", "sdpa")
def torch_cuda_sdpa(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs

    def run(inputs: list, dims: dict[str, int]):
        return attend(inputs, attrs, read_back=False)

    return Kernel(run, "torch_cuda:sdpa")
