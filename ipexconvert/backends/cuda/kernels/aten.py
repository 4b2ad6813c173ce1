"""aten (a generic ATen operator) on the GPU: the op's own compile with `device=` arguments naming the GPU.
A factory operator written without a device argument makes a CPU tensor; it is moved to the GPU, so every
value of the plan lives there (such ops compute dims-only values: they run once per set of dims, outside
the captured graph)."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.aten import AtenOp
from ....runtime.kernels import Kernel, NodeContext, register_kernel


def _to_gpu(value, gpu: torch.device):
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.to(gpu)
    if isinstance(value, (tuple, list)):
        return type(value)(_to_gpu(v, gpu) for v in value)
    return value


@register_kernel("cuda", "aten")
def torch_cuda_aten(ctx: NodeContext) -> Optional[Kernel]:
    gpu = torch.device(ctx.device, torch.cuda.current_device())
    run = AtenOp.compile(ctx.attrs, device=str(gpu))

    def on_gpu(inputs: list, dims: dict[str, int]):
        return _to_gpu(run(inputs, dims), gpu)

    return Kernel(on_gpu, "torch_cuda:aten")
