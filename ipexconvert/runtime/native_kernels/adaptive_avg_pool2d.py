"""Native global average pooling: adaptive_avg_pool2d to 1x1 on a float32/bfloat16 4-D input.

A CNN's head (ResNet-50: [N, 2048, 7, 7] bf16, channels-last, after the last convolution). The
native spatial_mean kernel reads the NHWC view of a channels-last input (or an NCHW-contiguous one)
and writes [N, C], summed in float32 like torch's kernel; other strides run the reference.
"""
from __future__ import annotations

import torch

from ... import native
from ...ir.opdef import get_op
from .. import kernels
from ..kernels import Kernel, NodeContext
from . import _common


@kernels.register_kernel("cpu", "adaptive_avg_pool2d")
def native_global_avg_pool(ctx: NodeContext):
    x = ctx.input_specs[0]
    if (ctx.device != "cpu" or not native.available() or list(ctx.attrs.output_size) != [1, 1] or x.rank != 4
            or x.dtype not in _common.DTYPES or ctx.constants[0] is not None):
        return None
    reference = get_op(ctx.op).compile(ctx.attrs)
    lib, isa = native.raw, ctx.isa

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        n, c, h, w = x.shape
        view = _common.dense_view(x)  # x itself, or the NHWC view of a channels-last x
        if view is None or h * w == 0:
            return reference(inputs, dims)
        out = torch.empty((n, c), dtype=x.dtype)
        lib.spatial_mean(view[0], not x.is_contiguous(), out, isa, torch.get_num_threads())
        return out.view(n, c, 1, 1)  # 1x1: contiguous and channels-last alike

    return Kernel(run, _common.kernel_name("adaptive_avg_pool2d", "spatial_mean", isa), fresh_output=True)
