"""Native rms_norm (last-dim, fp32 statistics) for float32/bfloat16."""
from __future__ import annotations

import functools

import torch

from ....ir.opdef import get_op
from ....ir.ops.rms_norm import effective_eps
from ....runtime import kernels
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "rms_norm", runs_at=_runs_at.native)
def native_rms_norm(ctx: NodeContext):
    """Native rms_norm over the last dim (float32/bfloat16, contiguous)."""
    attrs = ctx.attrs
    if not _native.qualifies(ctx, activations=(0,)) or len(attrs.normalized_shape) != 1:
        return None
    cols = attrs.normalized_shape[0]
    weight = _native.NormParam(ctx, 1)
    if not weight.fits(cols):
        return None
    eps = effective_eps(attrs.eps)  # the reference runs torch.rms_norm on float32 values
    lib, isa = _native.native_lib.raw, ctx.isa
    reference = get_op("rms_norm").compile(attrs)

    def run(inputs, dims):
        x, w = inputs[0], weight.get(inputs)
        if not x.is_contiguous():
            return reference([x, w], dims)
        out = torch.empty_like(x)
        lib.rms_norm(x, None, w, eps, out, None, isa, torch.get_num_threads())
        return out

    def bind(inputs, dims):
        x = inputs[0]
        if not x.is_contiguous() or not weight.binds(inputs):
            return None
        out = torch.empty_like(x)
        return functools.partial(lib.rms_norm, x, None, weight.get(inputs), eps, out, None, isa,
                                 torch.get_num_threads()), [out]

    return Kernel(run, _native.kernel_name("rms_norm", "rms_norm", isa), frozenset(weight.consumed), bind=bind)
