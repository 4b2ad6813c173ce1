"""Native softmax over the last dim (fp32 accumulation) for float32/bfloat16."""
from __future__ import annotations

from ....runtime import kernels
from ....runtime.kernels import NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "softmax", runs_at=_runs_at.native)
def native_softmax(ctx: NodeContext):
    """Native softmax over the last dim (float32/bfloat16, contiguous)."""
    if not _native.qualifies(ctx, activations=(0,)):
        return None
    if ctx.attrs.dim not in (-1, ctx.input_specs[0].rank - 1):
        return None  # the kernel reduces over the last dim only
    lib, isa = _native.native_lib.raw, ctx.isa
    return _native.unary_kernel(ctx, "softmax", lambda x, out, threads: lib.softmax(x, 1.0, None, out, isa, threads))
