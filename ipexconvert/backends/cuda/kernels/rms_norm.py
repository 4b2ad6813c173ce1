"""rms_norm on the GPU: one Triton kernel a row (_triton_jit.rms_norm_rows: float32 math, one rounding), the
weight cast once at load. The reference launches five kernels for bf16 (casts, torch's norm, the weight)."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir import dtypes
from ....ir.ops.rms_norm import effective_eps
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing

MAX_COLUMNS = 16384  # one row per program, held in registers: wider rows run the reference


@register_kernel("cuda", "rms_norm", runs_at=triton_missing)
def triton_rms_norm(ctx: NodeContext) -> Optional[Kernel]:
    shape, attrs = ctx.input_specs[0].shape, ctx.attrs
    columns = shape[-1]
    weight_spec, weight = ctx.input_specs[1], ctx.constants[1]
    if (len(attrs.normalized_shape) != 1 or not isinstance(columns, int) or columns > MAX_COLUMNS
            or (weight_spec is not None and weight is None)):
        return None
    dtype = dtypes.to_torch(ctx.input_specs[0].dtype)
    eps = effective_eps(attrs.eps)
    gpu = torch.device(ctx.device, torch.cuda.current_device())
    weight = None if weight is None else weight.to(gpu, torch.float32)

    def run(inputs: list, dims: dict[str, int]):
        return rms_norm_rows(inputs[0], weight, eps, columns, dtype)

    return Kernel(run, "triton:rms_norm", frozenset({1}) if weight is not None else frozenset(), fresh_output=True)


def rms_norm_rows(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, columns: int,
                  dtype: torch.dtype) -> torch.Tensor:
    """rms_norm of x's rows of `columns` (at most MAX_COLUMNS) times weight (float32, or None) in one Triton kernel,
    the result in dtype (also woq_linear.float_rows' prologue)."""
    import triton

    x = x.contiguous()
    y = torch.empty_like(x, dtype=dtype)
    rows = x.numel() // columns if columns else 0
    if rows:
        block = triton.next_power_of_2(columns)
        _triton.jit().rms_norm_rows[(rows,)](x, x if weight is None else weight, y, columns, eps,
                                             HAS_WEIGHT=weight is not None, BLOCK=block,
                                             num_warps=4 if block <= 2048 else 8)
    return y
