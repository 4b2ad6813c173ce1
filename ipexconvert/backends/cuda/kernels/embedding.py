"""embedding on the GPU: ids checked without a read-back (guards.py). Ids are clamped into the table
before the lookup (so no id reads outside it) and a guard flag records any that needed it; the runner
raises the same UserInputError as the CPU after the run. With Triton the clamp, the flag and the lookup are
one kernel (_triton_jit.embedding_rows; torch's operators take five: a decode step's token costs their
boundaries)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops.embedding import bad_ids_error
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ..guards import Guard
from . import _triton


@register_kernel("cuda", "embedding")
def torch_cuda_embedding(ctx: NodeContext) -> Optional[Kernel]:
    weight_spec = ctx.input_specs[0]
    rows = weight_spec.shape[0]
    if not isinstance(rows, int):
        return None  # a table of dynamic size: the reference checks it per call (no graph capture)
    gpu = torch.device(ctx.device, torch.cuda.current_device())
    guard = Guard(gpu, 1, 0, rows, lambda: bad_ids_error(rows, "an id"))

    triton = _triton.triton_missing("") is None

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        weight, ids = inputs
        if triton and weight.is_contiguous() and weight.dim() == 2 and ids.numel():
            return embedding_rows(weight, ids, guard.flag)
        inside = ids.clamp(0, rows - 1)
        guard.trip_if(inside != ids)
        return F.embedding(inside, weight)

    run.guards = (guard,)  # type: ignore[attr-defined]  (read by backends/cuda/graphs.py)
    return Kernel(run, "torch_cuda:embedding", fresh_output=True)


def embedding_rows(weight: torch.Tensor, ids: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """weight[ids] [*ids.shape, width], each id clamped into the table first; flag (a 0-d bool) set where one
    needed it."""
    import triton

    rows, width = weight.shape
    flat = ids.reshape(-1).contiguous()
    out = torch.empty((flat.numel(), width), dtype=weight.dtype, device=weight.device)
    block = min(2048, triton.next_power_of_2(width))
    _triton.jit().embedding_rows[(flat.numel(), triton.cdiv(width, block))](
        flat, weight, out, flag.view(torch.uint8), rows, width, BLOCK=block)
    return out.view(*ids.shape, width)
