"""max_pool2d of a channels-last float32 / bfloat16 / uint8 activation on a oneDNN pooling
primitive kept per input size (ipexconvert.backends.cpu.onednn_direct). torch's channels-last bf16 max_pool2d took
579-672 us at ResNet-50's [1, 64, 112, 112], this 112 us (docs/native.md). uint8: the int8
stem's codes (quantize_before_pool). Other layouts run the reference."""
from __future__ import annotations

from typing import Optional

import torch

from .. import onednn_direct
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ._torch_onednn import FLOAT_DTYPES, enabled, isa_allows
from ._onednn_direct_conv import spatial_out_size
from . import _runs_at

_DTYPES = (*FLOAT_DTYPES, "uint8")


@register_kernel("cpu", "max_pool2d", runs_at=_runs_at.onednn_direct_float)
def onednn_direct_max_pool2d(ctx: NodeContext) -> Optional[Kernel]:
    """Our oneDNN pooling primitive per input size: channels-last float32 / bfloat16 / uint8 (not for NaN-safe
    plans: it computes max(x, 0) for a fused relu)."""
    a, x = ctx.attrs, ctx.input_specs[0]
    if (ctx.device != "cpu" or not enabled() or ctx.nan_safe or x.rank != 4 or x.dtype not in _DTYPES
            or x.memory_format != "channels_last" or not isa_allows(ctx.isa, x.dtype) or not onednn_direct.usable(ctx.isa)):
        return None
    pool = onednn_direct.make_layer("onednn_direct:max_pool2d", onednn_direct.raw.MaxPool, tuple(a.kernel_size), tuple(a.stride),
                           tuple(a.padding), tuple(a.dilation), x.dtype)

    def output_size(x: torch.Tensor) -> tuple[int, int, int, int]:
        n, c, h, w = x.shape
        return (n, c) + spatial_out_size(h, w, a, tuple(a.kernel_size), clamp=True)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        out = torch.empty(output_size(x), dtype=x.dtype, memory_format=torch.channels_last)
        try:
            pool.run(x, out)
        except (ValueError, TypeError) as e:  # an input that does not fit the pooling (onednn_direct.py, arguments)
            raise onednn_direct.refused("onednn_direct:max_pool2d", e) from None
        return out

    def bind(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        if not x.is_contiguous(memory_format=torch.channels_last):
            return None
        n, c, oh, ow = output_size(x)
        out = buffer((n, oh, ow, c), x.dtype).permute(0, 3, 1, 2)  # channels-last
        return pool.bind(x, out), [out]

    return Kernel(run, "onednn_direct:max_pool2d", fresh_output=True, keeps_nan=False, bind=bind)
