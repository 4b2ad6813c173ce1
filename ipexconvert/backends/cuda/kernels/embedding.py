"""embedding on the GPU: ids checked without a read-back (guards.py). Ids are clamped into the table
before the lookup (so no id reads outside it) and a guard flag records any that needed it; the runner
raises the same UserInputError as the CPU after the run."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops.embedding import bad_ids_error
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ..guards import Guard


@register_kernel("cuda", "embedding")
def torch_cuda_embedding(ctx: NodeContext) -> Optional[Kernel]:
    weight_spec = ctx.input_specs[0]
    rows = weight_spec.shape[0]
    if not isinstance(rows, int):
        return None  # a table of dynamic size: the reference checks it per call (no graph capture)
    gpu = torch.device(ctx.device, torch.cuda.current_device())
    guard = Guard(gpu, 1, 0, rows, lambda: bad_ids_error(rows, "an id"))

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        weight, ids = inputs
        inside = ids.clamp(0, rows - 1)
        guard.trip_if(inside != ids)
        return F.embedding(inside, weight)

    run.guards = (guard,)  # type: ignore[attr-defined]  (read by backends/cuda/graphs.py)
    return Kernel(run, "torch_cuda:embedding", fresh_output=True)
