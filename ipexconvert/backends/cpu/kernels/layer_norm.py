"""Native layer_norm (last-dim normalisation, fp32 statistics) for float32/bfloat16."""
from __future__ import annotations

import functools

import torch

from ....ir.opdef import get_op
from ....runtime import kernels
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "layer_norm", runs_at=_runs_at.native)
def native_layer_norm(ctx: NodeContext):
    """Native layer_norm over the last dim (float32/bfloat16, contiguous)."""
    attrs = ctx.attrs
    if not _native.qualifies(ctx, activations=(0,)) or len(attrs.normalized_shape) != 1:
        return None
    cols = attrs.normalized_shape[0]
    weight, bias = _native.NormParam(ctx, 1), _native.NormParam(ctx, 2)
    if not (weight.fits(cols) and bias.fits(cols)):
        return None
    lib, isa, eps = _native.native_lib.raw, ctx.isa, float(attrs.eps)
    reference = get_op("layer_norm").compile(attrs)

    def run(inputs, dims):
        x, w, b = inputs[0], weight.get(inputs), bias.get(inputs)
        if not x.is_contiguous():  # e.g. a view from a reference kernel
            return reference([x, w, b], dims)
        out = torch.empty_like(x)
        lib.layer_norm(x, None, w, b, eps, out, None, isa, torch.get_num_threads())
        return out

    def bind(inputs, dims):
        x = inputs[0]
        if not x.is_contiguous() or not (weight.binds(inputs) and bias.binds(inputs)):
            return None
        out = buffer(x.shape, x.dtype)
        return functools.partial(lib.layer_norm, x, None, weight.get(inputs), bias.get(inputs), eps, out, None, isa,
                                 torch.get_num_threads()), [out]

    return Kernel(run, _native.kernel_name("layer_norm", "layer_norm", isa),
                  frozenset(weight.consumed | bias.consumed), bind=bind)
