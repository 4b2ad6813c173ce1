"""Weight quantization: symmetric int8, one scale per output channel (axis 0)."""
from __future__ import annotations

import torch

SCALE_FLOOR = 1e-12  # an all-zero channel still gets a valid (positive) scale


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 weight, float32 scales [out]) with scale = max|w_channel| / 127."""
    w = weight.detach().float()
    absmax = w.reshape(w.shape[0], -1).abs().amax(dim=1)
    scales = torch.clamp(absmax / 127.0, min=SCALE_FLOOR)
    q = torch.clamp(torch.round(w / scales.view(-1, *([1] * (w.dim() - 1)))), -128, 127).to(torch.int8)
    return q, scales
