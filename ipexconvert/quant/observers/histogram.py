"""histogram (MSE): the clipping range that minimises the expected quantization error.

For a candidate range [a, b] with step s = (b - a) / (levels - 1), the expected squared error of
the values seen is estimated from a streaming histogram (each bin as its count at its center):
values inside [a, b] get rounding noise s^2 / 12 (uniform within a step), values outside get the
clipping error (distance to the nearer end)^2. Candidates shrink each side of the observed range
(extended to include zero) independently on a geometric grid, so both one-sided and two-sided
clipping are searched. Tuned for uint8 (256 levels) by default; with qdtype int8 the range is
symmetrised afterwards by qparams_from_range.
"""
from __future__ import annotations

import math

import torch

from .base import Observer, StreamingHistogram, check_param, is_int, register_observer

_GRID = 400  # candidate positions per side; consecutive ones differ by under 2% at bins=2048


@register_observer
class HistogramObserver(Observer):
    name = "histogram"

    def __init__(self, bins: int = 2048, levels: int = 256) -> None:
        check_param(self.name, "bins", bins, is_int(bins, 2), "an integer >= 2, e.g. 2048")
        check_param(self.name, "levels", levels, is_int(levels, 2), "an integer >= 2, e.g. 256 for uint8")
        super().__init__(bins=bins, levels=levels)
        self.levels = levels
        self.hist = StreamingHistogram(bins)

    def _observe(self, x: torch.Tensor) -> None:
        self.hist.add(x)

    def _range(self) -> tuple[float, float]:
        # Shrink factors from one bin's share of the range (finer is below histogram resolution) to 1.
        factors = torch.logspace(-math.log10(self.hist.bins), 0, _GRID, dtype=torch.float64)
        factors[-1] = 1.0
        los = min(self.min, 0.0) * factors  # candidate a (<= 0)
        his = max(self.max, 0.0) * factors  # candidate b (>= 0)

        # Clipping error separates by side. With prefix sums of n, n*c and n*c^2 over the bins,
        # sum(n * (a - c)^2) over the bins below a is a^2*N - 2a*S1 + S2: O(bins) memory for any grid.
        c, n = self.hist.centers(), self.hist.counts
        zero = torch.zeros(1, dtype=torch.float64)
        N, S1, S2 = (torch.cat([zero, v.cumsum(0)]) for v in (n, n * c, n * c * c))
        k = torch.searchsorted(c, los)               # bins [0, k) have center < a
        m = torch.searchsorted(c, his, right=True)   # bins [m, end) have center > b
        n_below = N[k]
        n_above = N[-1] - N[m]
        err_below = (los ** 2 * n_below - 2 * los * S1[k] + S2[k]).clamp(min=0)
        err_above = (his ** 2 * n_above - 2 * his * (S1[-1] - S1[m]) + (S2[-1] - S2[m])).clamp(min=0)

        # Every (a, b) pair at once: rows are a, columns b. Total squared error, N times the MSE.
        step = (his[None, :] - los[:, None]) / (self.levels - 1)
        inside = N[-1] - n_below[:, None] - n_above[None, :]
        sq_err = inside * step ** 2 / 12 + err_below[:, None] + err_above[None, :]
        i, j = divmod(int(torch.argmin(sq_err)), _GRID)
        return float(los[i]), float(his[j])
