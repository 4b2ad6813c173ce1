"""Native add_layer_norm: layer_norm(x + residual) in one pass, optionally returning the sum and the
norm quantized (fold_norm_quantize)."""
from __future__ import annotations

import dataclasses
import functools

import torch

from ....ir import dtypes
from ....ir.opdef import get_op
from ....runtime import kernels
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "add_layer_norm", runs_at=_runs_at.native)
def native_add_layer_norm(ctx: NodeContext):
    """Native add+layer_norm over the last dim (float32/bfloat16, contiguous), optionally also returning the sum
    and the output quantized (fold_norm_quantize)."""
    attrs = ctx.attrs
    float_outputs = ctx.output_specs[:len(ctx.output_specs) - (attrs.quantize is not None)]  # the quantized one is int8
    if not _native.qualifies(dataclasses.replace(ctx, output_specs=float_outputs), activations=(0, 1)) \
            or len(attrs.normalized_shape) != 1:
        return None
    if ctx.input_specs[0].shape != ctx.input_specs[1].shape:
        return None  # a broadcast residual: the reference handles it
    cols = attrs.normalized_shape[0]
    weight, bias, multiplier = _native.NormParam(ctx, 2), _native.NormParam(ctx, 3), _native.NormParam(ctx, 4)
    if not (weight.fits(cols) and bias.fits(cols) and multiplier.fits(cols)):
        return None
    lib, isa, eps, return_sum = _native.native_lib.raw, ctx.isa, float(attrs.eps), attrs.return_sum
    reference = get_op("add_layer_norm").compile(attrs)
    quant = attrs.quantize
    q_dtype = None if quant is None else dtypes.to_torch(quant.dtype)
    q_args = {} if quant is None else {"q_scale": quant.scale, "q_zero_point": quant.zero_point}

    def run(inputs, dims):
        x, r, w, b = inputs[0], inputs[1], weight.get(inputs), bias.get(inputs)
        if not (x.is_contiguous() and r.is_contiguous()) or x.shape != r.shape:
            return reference([x, r, w, b, multiplier.get(inputs)], dims)
        out = torch.empty_like(x)
        total = torch.empty_like(x) if return_sum else None
        q = None if q_dtype is None else torch.empty(x.shape, dtype=q_dtype)
        lib.layer_norm(x, r, w, b, eps, out, total, isa, torch.get_num_threads(), q_out=q,
                       q_multipliers=multiplier.get(inputs), **q_args)
        outs = [out] + ([total] if return_sum else []) + ([q] if q is not None else [])
        return tuple(outs) if len(outs) > 1 else out

    def bind(inputs, dims):
        x, r = inputs[0], inputs[1]
        if (not (x.is_contiguous() and r.is_contiguous()) or x.shape != r.shape
                or not all(p.binds(inputs) for p in (weight, bias, multiplier))):
            return None
        out = buffer(x.shape, x.dtype)
        total = buffer(x.shape, x.dtype) if return_sum else None
        q = None if q_dtype is None else buffer(x.shape, q_dtype)
        call = functools.partial(lib.layer_norm, x, r, weight.get(inputs), bias.get(inputs), eps, out, total, isa,
                                 torch.get_num_threads(), q_out=q, q_multipliers=multiplier.get(inputs), **q_args)
        return call, [out] + ([total] if return_sum else []) + ([q] if q is not None else [])

    return Kernel(run, _native.kernel_name("add_layer_norm", "layer_norm", isa),
                  frozenset(weight.consumed | bias.consumed | multiplier.consumed), bind=bind)
