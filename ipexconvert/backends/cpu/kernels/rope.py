"""Native rope (rotate-half rotary embedding) for float32/bfloat16: one pass over a permuted view of the
projection, in place of the seven torch calls the pattern was."""
from __future__ import annotations

import torch

from ....runtime import kernels
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "rope", runs_at=_runs_at.native)
def native_rope(ctx: NodeContext):
    """Native rope: x [b, heads, s, d] with any strides (the last dim contiguous), cos/sin [b or 1, 1, s, d]."""
    x, cos = ctx.input_specs[0], ctx.input_specs[1]
    if ctx.device != "cpu" or not _native.native_lib.available() or x.dtype not in _native.DTYPES \
            or cos.dtype not in _native.DTYPES or not isinstance(x.shape[3], int) or x.shape[3] > 1024:
        return None
    lib, isa = _native.native_lib.raw, ctx.isa

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x, cos, sin = inputs
        if x.stride(3) != 1:
            x = x.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype)
        lib.rope(x, cos.contiguous(), sin.contiguous(), out, isa, torch.get_num_threads())
        return out

    return Kernel(run, _native.kernel_name("rope", "rope", isa), fresh_output=True)
