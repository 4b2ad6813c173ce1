"""Native silu_mul (a SwiGLU gate) for float32/bfloat16: a and b contiguous, or rows of one stride each (the
column halves of a merged gate/up GEMM output), in one pass."""
from __future__ import annotations

import functools

import torch

from ....ir.opdef import get_op
from ....ir.ops.silu_mul import halves
from ....runtime import kernels
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


def _rows(t: torch.Tensor):
    """t as [rows, last dim] without copying (None when its leading dims do not merge into one stride or its
    last dim is not contiguous)."""
    if t.dim() == 0 or t.stride(-1) != 1:
        return None
    try:
        return t.view(-1, t.shape[-1])
    except RuntimeError:
        return None


@kernels.register_kernel("cpu", "silu_mul", runs_at=_runs_at.native)
def native_silu_mul(ctx: NodeContext):
    """Native silu(a) * b: contiguous operands, or rows of a slice (the halves of one input read in place)."""
    one_input = len(ctx.input_specs) == 1
    if not _native.qualifies(ctx, activations=(0,) if one_input else (0, 1)):
        return None
    lib, isa = _native.native_lib.raw, ctx.isa
    reference = get_op("silu_mul").compile(ctx.attrs)

    def run(inputs, dims):
        if one_input and inputs[0].is_contiguous():  # the merged gate/up output: read in place, no views made
            x = inputs[0]
            out = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)
            lib.silu_mul_halves(x, out, isa, torch.get_num_threads())
            return out
        a, b = halves(inputs[0]) if one_input else inputs
        out = torch.empty(a.shape, dtype=a.dtype)
        if not (a.is_contiguous() and b.is_contiguous()):  # slices: both as rows
            a, b = _rows(a), _rows(b)
            if a is None or b is None or out.numel() == 0:
                return reference(inputs, dims)
        lib.silu_mul(a, b, out, isa, torch.get_num_threads())
        return out

    def bind(inputs, dims):
        threads = torch.get_num_threads()
        if one_input and inputs[0].is_contiguous():
            x = inputs[0]
            out = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)
            return functools.partial(lib.silu_mul_halves, x, out, isa, threads), [out]
        if not one_input and all(t.is_contiguous() for t in inputs) and inputs[0].shape == inputs[1].shape:
            out = torch.empty(inputs[0].shape, dtype=inputs[0].dtype)
            return functools.partial(lib.silu_mul, inputs[0], inputs[1], out, isa, threads), [out]
        return None

    return Kernel(run, _native.kernel_name("silu_mul", "silu_mul", isa), fresh_output=True, bind=bind)
