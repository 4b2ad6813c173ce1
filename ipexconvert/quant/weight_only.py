"""Weight-only quantization by round-to-nearest (RTN): a float weight [N, K] -> codes, scales, zero points.

Formats (the woq_linear op's inputs, ir/ops/woq_linear.py), per output channel n and group g of
`group_size` consecutive input features (group_size = K: one group per channel):

- int8, symmetric: scale = max|w| / 127, code = clamp(round(w / scale), -127, 127), stored int8.
- int4, symmetric: scale = max|w| / 7, code = clamp(round(w / scale), -8, 7), stored + 8 (0..15).
- int4, asymmetric: lo = min(w, 0), hi = max(w, 0), scale = (hi - lo) / 15,
  zero = clamp(round(-lo / scale), 0, 15), code = clamp(round(w / scale) + zero, 0, 15).
  The range always holds 0 (a group of only positive weights would otherwise clip), so zero is exact.

`round` is round half to even (torch.round), computed in float32 on w / scale (a true division): that
is the promise tests hold. A group of zeros gets scale 1 (any positive scale represents it exactly);
scales are floored at float32's smallest normal number, so w / scale stays finite. 4-bit codes are
packed two per byte, the even k in the low nibble.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

import torch

from ..ir.ops.woq_linear import SYMMETRIC_INT4_ZERO, dequantize

_TINY = torch.finfo(torch.float32).tiny


@dataclass(frozen=True)
class QuantizedWeight:
    """A weight as woq_linear reads it."""

    codes: torch.Tensor                 # int8 [N, K] (bits 8) or uint8 [N, K / 2] (bits 4)
    scales: torch.Tensor                # float32 [N, K / group_size]
    zero_points: Optional[torch.Tensor]  # uint8 [N, K / group_size] (asymmetric int4), else None
    bits: int
    group_size: int


class WeightCodes:
    """Codes chosen before the passes (quant/weight_only_inc.py: GPTQ, AWQ), keyed by the IR name of the float weight
    constant each replaces; weight_only_quantize takes them instead of rounding that weight to nearest. A pass that
    builds one weight constant from several (merge_linears: rows concatenated) registers the new name with `concat`,
    so the codes follow the weight. Mutable on purpose: PassOptions (frozen) holds one for the whole pipeline."""

    def __init__(self, codes: Mapping[str, QuantizedWeight] = ()):
        self._codes = dict(codes)

    def __len__(self) -> int:
        return len(self._codes)

    def get(self, name: str) -> Optional[QuantizedWeight]:
        return self._codes.get(name)

    def format_of(self, name: str) -> Optional[tuple[int, int, bool]]:
        """(bits, group size, has zero points) of a weight's codes, None without codes: linears merge only with
        linears whose codes share it (or that have none)."""
        q = self._codes.get(name)
        return None if q is None else (q.bits, q.group_size, q.zero_points is not None)

    def concat(self, name: str, parts: Iterable[str]) -> None:
        """Register `name`, the rows of the `parts` weights one after another, when every part has codes (codes,
        scales and zero points are per output row, so they stack the same way)."""
        qs = [self._codes.get(part) for part in parts]
        if not qs or any(q is None for q in qs):
            return
        if len({(q.bits, q.group_size, q.zero_points is not None) for q in qs}) != 1:
            raise ValueError(f"{name}: the merged weights' codes differ in bits, group size or zero points")
        zero_points = None if qs[0].zero_points is None else torch.cat([q.zero_points for q in qs])
        self._codes[name] = QuantizedWeight(torch.cat([q.codes for q in qs]), torch.cat([q.scales for q in qs]),
                                            zero_points, qs[0].bits, qs[0].group_size)


def unsupported_reason(weight: torch.Tensor, bits: int, group_size: int) -> Optional[str]:
    """Why this weight cannot be quantized with these settings (the layer stays float), or None."""
    if weight.dim() != 2 or not weight.is_floating_point():
        return "not a 2-D float weight"
    n, k = weight.shape
    if n == 0 or k == 0:
        return "empty weight"
    if k % group_size != 0:
        return "in_features not divisible by the group size"
    if bits == 4 and group_size % 2 != 0:
        return "odd group size for 4-bit codes"
    if not bool(torch.isfinite(weight).all()):
        return "non-finite weights"
    return None


def _safe_scales(span: torch.Tensor, levels: float) -> torch.Tensor:
    """span / levels, 1 where the group is all zero, never below float32's smallest normal number."""
    scales = (span / levels).clamp_min(_TINY)
    return torch.where(span > 0, scales, torch.ones_like(scales))


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes 0..15 [N, K] (K even) -> uint8 [N, K / 2], k even in the low nibble."""
    return codes[:, 0::2] | (codes[:, 1::2] << 4)


def quantize_weight(weight: torch.Tensor, bits: int, group_size: int, symmetric: bool = True) -> QuantizedWeight:
    """RTN codes, scales and zero points of a float weight [N, K]; ValueError when unsupported_reason says so."""
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, not {bits}")
    reason = unsupported_reason(weight, bits, group_size)
    if reason is not None:
        raise ValueError(f"cannot quantize a {tuple(weight.shape)} weight to int{bits} in groups of {group_size}: {reason}")
    if bits == 8 and not symmetric:
        raise ValueError("int8 weight-only quantization is symmetric")
    n, k = weight.shape
    w = weight.detach().float().reshape(n, k // group_size, group_size)
    if symmetric:
        levels = 127.0 if bits == 8 else 7.0
        scales = _safe_scales(w.abs().amax(dim=2), levels)
        q = torch.round(w / scales.unsqueeze(2))
        if bits == 8:
            codes = q.clamp(-127, 127).to(torch.int8).reshape(n, k)
            return QuantizedWeight(codes, scales, None, 8, group_size)
        codes = (q.clamp(-8, 7) + SYMMETRIC_INT4_ZERO).to(torch.uint8).reshape(n, k)
        return QuantizedWeight(pack_int4(codes), scales, None, 4, group_size)
    lo, hi = w.amin(dim=2).clamp_max(0.0), w.amax(dim=2).clamp_min(0.0)
    scales = _safe_scales(hi - lo, 15.0)
    zero = torch.round(-lo / scales).clamp(0, 15)
    q = (torch.round(w / scales.unsqueeze(2)) + zero.unsqueeze(2)).clamp(0, 15)
    return QuantizedWeight(pack_int4(q.to(torch.uint8).reshape(n, k)), scales, zero.to(torch.uint8), 4, group_size)


def weight_error(weight: torch.Tensor, bits: int, group_size: int, symmetric: bool = True) -> float:
    """RMS(dequantized - W) / mean|W| of the RTN codes: the rounding error against the typical weight (the weight-only
    accuracy guard moves the layers with the largest back to float first). Against the typical weight, not ||W||: a
    group holding an outlier rounds its other weights to zero, which ||W||, made large by the outlier itself, hides
    (tiny-llama int4 g128: about 0.15 a layer, 0.8 or more with a 30x outlier column per group). 0 for a zero weight."""
    return codes_error(weight, quantize_weight(weight, bits, group_size, symmetric))


def codes_error(weight: torch.Tensor, q: QuantizedWeight) -> float:
    """RMS(dequantized - W) / mean|W| of the codes `q` of `weight` (weight_error's measure, for codes made elsewhere)."""
    w = weight.detach().float()
    typical = float(w.abs().mean())
    error = dequantize(q.codes, q.scales, q.zero_points, q.bits, q.group_size) - w
    return float(error.pow(2).mean().sqrt()) / typical if typical > 0 else 0.0
