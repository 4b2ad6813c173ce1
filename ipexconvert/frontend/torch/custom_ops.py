"""Torch ops of our own that frontends call while tracing, where no ATen op traces as one node.

They exist only between a frontend and the ATen map (aten_map/); an artifact never names them.
"""
from __future__ import annotations

import torch

from ...ir.ops.fake_quantize import fake_quantize_range


# torch's fake_quantize_per_tensor_affine has no meta kernel, so torch.export cannot trace it with
# dynamic dims. This computes ONNX's QuantizeLinear -> DequantizeLinear arithmetic (the IR's
# fake_quantize, ir/ops/fake_quantize.py) and traces as one node.
@torch.library.custom_op("ipexconvert::fake_quantize", mutates_args=())
def fake_quantize(input: torch.Tensor, scale: float, zero_point: int, quant_min: int, quant_max: int) -> torch.Tensor:
    return fake_quantize_range(input, scale, zero_point, quant_min, quant_max)


@fake_quantize.register_fake
def _(input, scale, zero_point, quant_min, quant_max):
    return torch.empty_like(input)


def resolve(target: str):
    """The op a target string of our namespace names ("ipexconvert.fake_quantize.default"), or ValueError."""
    parts = target.split(".")
    packet = getattr(torch.ops.ipexconvert, parts[1], None) if len(parts) == 3 and parts[0] == "ipexconvert" else None
    if packet is None or not hasattr(packet, parts[2]):
        raise ValueError(f"{target!r} is not one of ipexconvert's own torch ops")
    return getattr(packet, parts[2])
