"""Native gelu (erf or tanh approximation) for float32/bfloat16."""
from __future__ import annotations

from .. import kernels
from ..kernels import NodeContext
from . import _common


@kernels.register_kernel("cpu", "gelu")
def native_gelu(ctx: NodeContext):
    if not _common.qualifies(ctx, activations=(0,)):
        return None
    lib, isa, tanh = _common.native.raw, ctx.isa, ctx.attrs.approximate == "tanh"
    return _common.unary_kernel(ctx, "gelu", lambda x, out, threads: lib.gelu(x, tanh, out, isa, threads))
