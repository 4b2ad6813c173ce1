"""percentile: clip at the p-th percentile on each side, estimated from a streaming histogram."""
from __future__ import annotations

import torch

from .base import Observer, StreamingHistogram, check_param, is_int, is_number, register_observer


@register_observer
class PercentileObserver(Observer):
    """lo = the (100 - p)th percentile, hi = the p-th; accurate to about one histogram bin."""

    name = "percentile"

    def __init__(self, percentile: float = 99.99, bins: int = 2048) -> None:
        check_param(self.name, "percentile", percentile, is_number(percentile) and 50 < percentile <= 100,
                    "a number in (50, 100], e.g. 99.99")
        check_param(self.name, "bins", bins, is_int(bins, 2), "an integer >= 2, e.g. 2048")
        super().__init__(percentile=float(percentile), bins=bins)
        self.percentile = float(percentile)
        self.hist = StreamingHistogram(bins)

    def _observe(self, x: torch.Tensor) -> None:
        self.hist.add(x)

    def _range(self) -> tuple[float, float]:
        q = self.percentile / 100
        lo, hi = self.hist.quantile(1 - q), self.hist.quantile(q)
        # Interpolating inside a bin can overshoot the data: never report beyond what was seen.
        return max(lo, self.min), min(hi, self.max)
