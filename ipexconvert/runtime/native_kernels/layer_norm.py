"""Native layer_norm (last-dim normalisation, fp32 statistics) for float32/bfloat16."""
from __future__ import annotations

import torch

from ...ir.opdef import get_op
from .. import kernels
from ..kernels import Kernel, NodeContext
from . import _common


@kernels.register_kernel("cpu", "layer_norm")
def native_layer_norm(ctx: NodeContext):
    attrs = ctx.attrs
    if not _common.qualifies(ctx, activations=(0,)) or len(attrs.normalized_shape) != 1:
        return None
    cols = attrs.normalized_shape[0]
    weight, bias = _common.NormParam(ctx, 1), _common.NormParam(ctx, 2)
    if not (weight.fits(cols) and bias.fits(cols)):
        return None
    lib, isa, eps = _common.native.raw, ctx.isa, float(attrs.eps)
    reference = get_op("layer_norm").compile(attrs)

    def run(inputs, dims):
        x, w, b = inputs[0], weight.get(inputs), bias.get(inputs)
        if not x.is_contiguous():  # e.g. a view from a reference kernel
            return reference([x, w, b], dims)
        out = torch.empty_like(x)
        lib.layer_norm(x, None, w, b, eps, out, None, isa, torch.get_num_threads())
        return out

    return Kernel(run, _common.kernel_name("layer_norm", "layer_norm", isa),
                  frozenset(weight.consumed | bias.consumed))
