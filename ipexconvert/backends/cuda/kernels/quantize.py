"""quantize on the GPU: one Triton kernel (_triton_int8.py) with the reference's arithmetic, where x is dense in
the layout the result must have (contiguous; channels-last when the node asks for it; contiguous only with a
per-channel multiplier, which runs over the innermost axis), or, for a channels-last result without a multiplier,
from any layout (an image in NCHW: its reads along rows, the codes written channels-last). Other cases run the
reference."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops.quantize import QuantizeOp
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton_int8
from ._triton import triton_missing


@register_kernel("cuda", "quantize", runs_at=triton_missing)
def triton_quantize(ctx: NodeContext) -> Optional[Kernel]:
    """One pass, any float dtype, per tensor or with a per-channel multiplier."""
    attrs = ctx.attrs
    multiplier = ctx.constants[1] if len(ctx.constants) > 1 else None
    if len(ctx.input_specs) > 1 and multiplier is None:
        return None  # a computed multiplier: the reference
    multiplier = None if multiplier is None else multiplier.float().contiguous()
    reference = QuantizeOp.compile(attrs)

    def fits(x: torch.Tensor) -> bool:
        if attrs.memory_format == "channels_last":
            return multiplier is None and x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
        return x.is_contiguous()

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if not fits(x):
            if attrs.memory_format == "channels_last" and multiplier is None and x.dim() == 4:
                return _triton_int8.run_quantize_to_channels_last(x, attrs.scale, attrs.zero_point, attrs.dtype)
            return reference([x, multiplier], dims)
        return _triton_int8.run_quantize(x, attrs.scale, attrs.zero_point, attrs.dtype, multiplier)

    return Kernel(run, "triton:quantize", frozenset({1}) if multiplier is not None else frozenset(), fresh_output=True)
