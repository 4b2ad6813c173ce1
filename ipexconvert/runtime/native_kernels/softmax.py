"""Native softmax over the last dim (fp32 accumulation) for float32/bfloat16."""
from __future__ import annotations

import torch

from ...ir.opdef import get_op
from .. import kernels
from ..kernels import Kernel, NodeContext
from . import _common


@kernels.register_kernel("cpu", "softmax")
def native_softmax(ctx: NodeContext):
    if not _common.qualifies(ctx, activations=(0,)):
        return None
    rank = ctx.input_specs[0].rank
    if ctx.attrs.dim not in (-1, rank - 1):
        return None  # the kernel reduces over the last dim only
    lib, isa = _common.native.raw, ctx.isa
    reference = get_op("softmax").compile(ctx.attrs)

    def run(inputs, dims):
        x = inputs[0]
        if not x.is_contiguous():
            return reference(inputs, dims)
        out = torch.empty_like(x)
        lib.softmax(x, 1.0, None, out, isa, torch.get_num_threads())
        return out

    return Kernel(run, _common.kernel_name("softmax", "softmax", isa))
