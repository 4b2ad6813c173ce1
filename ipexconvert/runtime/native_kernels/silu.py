"""Native silu for float32/bfloat16."""
from __future__ import annotations

from .. import kernels
from ..kernels import NodeContext
from . import _common


@kernels.register_kernel("cpu", "silu")
def native_silu(ctx: NodeContext):
    if not _common.qualifies(ctx, activations=(0,)):
        return None
    lib, isa = _common.native.raw, ctx.isa
    return _common.unary_kernel(ctx, "silu", lambda x, out, threads: lib.silu(x, out, isa, threads))
