"""Native silu for float32/bfloat16."""
from __future__ import annotations

import torch

from ...ir.opdef import get_op
from .. import kernels
from ..kernels import Kernel, NodeContext
from . import _common


@kernels.register_kernel("cpu", "silu")
def native_silu(ctx: NodeContext):
    if not _common.qualifies(ctx, activations=(0,)):
        return None
    lib, isa = _common.native.raw, ctx.isa
    reference = get_op("silu").compile(ctx.attrs)

    def run(inputs, dims):
        x = inputs[0]
        if not x.is_contiguous():
            return reference(inputs, dims)
        out = torch.empty_like(x)
        lib.silu(x, out, isa, torch.get_num_threads())
        return out

    return Kernel(run, _common.kernel_name("silu", "silu", isa))
