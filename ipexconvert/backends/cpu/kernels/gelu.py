"""Native gelu (erf or tanh approximation) for float32/bfloat16."""
from __future__ import annotations

from ....runtime import kernels
from ....runtime.kernels import NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "gelu", runs_at=_runs_at.native)
def native_gelu(ctx: NodeContext):
    """Native GELU (erf or tanh) on a float32/bfloat16 contiguous input."""
    if not _native.qualifies(ctx, activations=(0,)):
        return None
    lib, isa, tanh = _native.native_lib.raw, ctx.isa, ctx.attrs.approximate == "tanh"
    return _native.unary_kernel(ctx, "gelu", lambda x, out, threads: lib.gelu(x, tanh, out, isa, threads))
