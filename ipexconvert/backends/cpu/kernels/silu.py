"""Native silu for float32/bfloat16."""
from __future__ import annotations

from ....runtime import kernels
from ....runtime.kernels import NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "silu", runs_at=_runs_at.native)
def native_silu(ctx: NodeContext):
    """Native SiLU on a float32/bfloat16 contiguous input."""
    if not _native.qualifies(ctx, activations=(0,)):
        return None
    lib, isa = _native.native_lib.raw, ctx.isa
    return _native.unary_kernel(ctx, "silu", lambda x, out, threads: lib.silu(x, out, isa, threads))
