"""Native global average pooling: adaptive_avg_pool2d to 1x1 on a float32/bfloat16 4-D input.

A CNN's head (ResNet-50: [N, 2048, 7, 7] bf16, channels-last, after the last convolution). The
native spatial_mean kernel reads the NHWC view of a channels-last input (or an NCHW-contiguous one)
and writes [N, C], summed in float32 like torch's kernel; other strides run the reference.
"""
from __future__ import annotations

import functools

import torch

from .. import native_lib
from ....ir.opdef import get_op
from ....runtime import kernels
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "adaptive_avg_pool2d", runs_at=_runs_at.native)
def native_global_avg_pool(ctx: NodeContext):
    """To 1x1 only: native spatial_mean over a float32/bfloat16 4-D input, channels-last (its NHWC view) or
    NCHW-contiguous at run time, summed in float32."""
    x = ctx.input_specs[0]
    if (ctx.device != "cpu" or not native_lib.available() or list(ctx.attrs.output_size) != [1, 1] or x.rank != 4
            or x.dtype not in _native.DTYPES or ctx.constants[0] is not None):
        return None
    reference = get_op(ctx.op).compile(ctx.attrs)
    lib, isa = native_lib.raw, ctx.isa

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        n, c, h, w = x.shape
        view = _native.dense_view(x)  # x itself, or the NHWC view of a channels-last x
        if view is None or h * w == 0:
            return reference(inputs, dims)
        out = torch.empty((n, c), dtype=x.dtype)
        lib.spatial_mean(view[0], not x.is_contiguous(), out, isa, torch.get_num_threads())
        return out.view(n, c, 1, 1)  # 1x1: contiguous and channels-last alike

    def bind(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        n, c, h, w = x.shape
        view = _native.dense_view(x)
        if view is None or h * w == 0:
            return None
        out = buffer((n, c), x.dtype)
        call = functools.partial(lib.spatial_mean, view[0], not x.is_contiguous(), out, isa, torch.get_num_threads())
        return call, [out.view(n, c, 1, 1)]

    return Kernel(run, _native.kernel_name("adaptive_avg_pool2d", "spatial_mean", isa), fresh_output=True, bind=bind)
