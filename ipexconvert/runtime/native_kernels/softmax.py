"""Native softmax over the last dim (fp32 accumulation) for float32/bfloat16."""
from __future__ import annotations

from .. import kernels
from ..kernels import NodeContext
from . import _common


@kernels.register_kernel("cpu", "softmax")
def native_softmax(ctx: NodeContext):
    if not _common.qualifies(ctx, activations=(0,)):
        return None
    if ctx.attrs.dim not in (-1, ctx.input_specs[0].rank - 1):
        return None  # the kernel reduces over the last dim only
    lib, isa = _common.native.raw, ctx.isa
    return _common.unary_kernel(ctx, "softmax", lambda x, out, threads: lib.softmax(x, 1.0, None, out, isa, threads))
