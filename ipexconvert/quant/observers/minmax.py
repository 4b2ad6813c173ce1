"""minmax: the range is the running min and max (nothing clipped, outliers stretch the scale)."""
from __future__ import annotations

from .base import Observer, register_observer


@register_observer
class MinMaxObserver(Observer):
    name = "minmax"

    def __init__(self) -> None:
        super().__init__()

    def _range(self) -> tuple[float, float]:
        return self.min, self.max
