"""Native rms_norm (last-dim, fp32 statistics) for float32/bfloat16."""
from __future__ import annotations

import torch

from ...ir.opdef import get_op
from .. import kernels
from ..kernels import Kernel, NodeContext
from . import _common


@kernels.register_kernel("cpu", "rms_norm")
def native_rms_norm(ctx: NodeContext):
    attrs = ctx.attrs
    if not _common.qualifies(ctx, activations=(0,)) or len(attrs.normalized_shape) != 1:
        return None
    cols = attrs.normalized_shape[0]
    weight = _common.NormParam(ctx, 1)
    if not weight.fits(cols):
        return None
    # The reference runs torch.rms_norm on float32 values, whose default eps is float32's epsilon.
    eps = torch.finfo(torch.float32).eps if attrs.eps is None else float(attrs.eps)
    lib, isa = _common.native.raw, ctx.isa
    reference = get_op("rms_norm").compile(attrs)

    def run(inputs, dims):
        x, w = inputs[0], weight.get(inputs)
        if not x.is_contiguous():
            return reference([x, w], dims)
        out = torch.empty_like(x)
        lib.rms_norm(x, None, w, eps, out, None, isa, torch.get_num_threads())
        return out

    return Kernel(run, _common.kernel_name("rms_norm", "rms_norm", isa), frozenset(weight.consumed))
