"""Native channel concat: an `aten.cat.default` node joining two 4-D tensors along dim 1.

merge_shortcut_conv's concat (a ResNet block's main-path activation and its subsampled input,
uint8, channels-last) is the case this serves: the native concat_channels kernel copies each
output pixel's two channel runs, reading the subsample through its strides. Inputs whose channels
are not contiguous run the reference (torch.cat); other aten nodes are not this kernel's.
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

_TWO_INPUTS = [{"$in": 0}, {"$in": 1}]
_ALONG_CHANNELS = ([_TWO_INPUTS, 1], [_TWO_INPUTS, -3])  # the args of cat([x, y], dim=1) on 4-D tensors


@kernels.register_kernel("cpu", "aten", runs_at=_runs_at.native)
def native_concat_channels(ctx: NodeContext):
    """aten.cat of two 4-D inputs along dim 1 whose channels are contiguous at run time (channels-last tensors and
    strided slices of them, as merge_shortcut_conv makes); copies bytes, any dtype."""
    a = ctx.attrs
    if (ctx.device != "cpu" or not native_lib.available() or a.target != "aten.cat.default" or a.kwargs
            or a.args not in _ALONG_CHANNELS):
        return None
    specs = ctx.input_specs[:2]
    if len(ctx.input_specs) != 2 or any(s is None or s.rank != 4 for s in specs) or specs[0].dtype != specs[1].dtype:
        return None
    if any(c is not None for c in ctx.constants):
        return None
    reference = get_op(ctx.op).compile(a)
    lib, isa = native_lib.raw, ctx.isa

    def fits(x: torch.Tensor, y: torch.Tensor) -> bool:
        """The kernel takes them: one batch and image size, contiguous channels."""
        return (x.shape[0] == y.shape[0] and x.shape[2:] == y.shape[2:]
                and (x.shape[1] <= 1 or x.stride(1) == 1) and (y.shape[1] <= 1 or y.stride(1) == 1))

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x, y = inputs
        if not fits(x, y):
            return reference(inputs, dims)
        n, _, h, w = x.shape
        out = torch.empty((n, h, w, x.shape[1] + y.shape[1]), dtype=x.dtype).permute(0, 3, 1, 2)
        lib.concat_channels(x, y, out, isa, torch.get_num_threads())
        return out

    def bind(inputs: list, dims: dict[str, int]):
        x, y = inputs
        if not fits(x, y):
            return None
        n, _, h, w = x.shape
        out = buffer((n, h, w, x.shape[1] + y.shape[1]), x.dtype).permute(0, 3, 1, 2)
        return functools.partial(lib.concat_channels, x, y, out, isa, torch.get_num_threads()), [out]

    return Kernel(run, _native.kernel_name("concat", "concat_channels", isa), fresh_output=True, bind=bind)
