"""Observer base class, registry, qparams from a range, and the streaming histogram observers share.

An observer sees calibration batches of one tensor and proposes a clipping range (lo, hi) for
per-tensor activation quantization. Statistics are kept in float32 on the CPU, in memory that
does not grow with the number of batches.
"""
from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, TypeVar

import torch

from ...errors import UserInputError

QDTYPES = ("uint8", "int8")

# Smallest scale qparams_from_range returns: float32 epsilon (~1.19e-7), the floor torch.ao's
# observers use, so an all-zero (or constant) tensor still gets a usable, normal, invertible scale.
MIN_SCALE = float(torch.finfo(torch.float32).eps)


class Observer(ABC):
    """Collects statistics of one tensor over calibration batches; `range()` gives (lo, hi)."""

    name: ClassVar[str]

    def __init__(self, **params: Any) -> None:
        self.params: dict[str, Any] = params  # echoed in summary(), JSON-able
        self.min: float | None = None
        self.max: float | None = None

    def update(self, x: torch.Tensor) -> None:
        """Fold one batch in (any float dtype, any shape, any device). Empty batches are ignored."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"observer {self.name} needs a floating-point tensor, got "
                            f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
        x = x.detach().to("cpu", torch.float32).reshape(-1)
        if x.numel() == 0:
            return
        bad = int((~torch.isfinite(x)).sum())
        if bad:  # a NaN/inf would poison min/max and the histogram; the model or data is broken
            raise ValueError(f"observer {self.name}: calibration tensor has {bad} non-finite "
                             f"value(s) (NaN or inf) out of {x.numel()}; feed finite calibration data")
        bmin, bmax = (float(v) for v in torch.aminmax(x))
        self.min = bmin if self.min is None else min(self.min, bmin)
        self.max = bmax if self.max is None else max(self.max, bmax)
        self._observe(x)

    def _observe(self, x: torch.Tensor) -> None:
        """Subclass hook: x is a finite, non-empty, 1-D float32 CPU tensor; min/max are already updated."""

    @abstractmethod
    def _range(self) -> tuple[float, float]:
        """The clipping range before zero is included; only called after some data was seen."""

    def range(self) -> tuple[float, float]:
        """Calibrated (lo, hi) with lo <= 0 <= hi, so that zero is exactly representable."""
        if self.min is None:
            raise RuntimeError(f"observer {self.name} saw no data")
        lo, hi = self._range()
        return min(float(lo), 0.0), max(float(hi), 0.0)

    def summary(self) -> dict[str, Any]:
        lo, hi = self.range()
        return {"observer": self.name, "min": self.min, "max": self.max, "lo": lo, "hi": hi, **self.params}


OBSERVERS: dict[str, type[Observer]] = {}
ObserverT = TypeVar("ObserverT", bound=type[Observer])


def register_observer(cls: ObserverT) -> ObserverT:
    """Class decorator: make `cls` available to make_observer under `cls.name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"observer class {cls.__name__} needs a string `name`")
    if name in OBSERVERS:
        raise RuntimeError(f"observer {name} registered twice")
    OBSERVERS[name] = cls
    return cls


def make_observer(name: str, **params: Any) -> Observer:
    """A fresh observer by registry name; unknown names or parameters are the user's to fix."""
    cls = OBSERVERS.get(name)
    if cls is None:
        raise UserInputError(f"unknown observer {name!r}", f"use one of: {', '.join(sorted(OBSERVERS))}")
    accepted = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise UserInputError(f"observer {name} has no parameter(s) {', '.join(unknown)}",
                             f"its parameters are: {', '.join(accepted) or '(none)'}")
    return cls(**params)


def check_param(observer: str, param: str, value: Any, ok: bool, expected: str) -> None:
    """Raise UserInputError for a bad observer parameter (they come from the CLI/API)."""
    if not ok:
        raise UserInputError(f"observer {observer}: {param}={value!r} is invalid",
                             f"pass {param} as {expected}")


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def qparams_from_range(lo: float, hi: float, dtype: str) -> tuple[float, int]:
    """(scale, zero_point) for per-tensor quantization of [lo, hi] (widened to include 0).

    uint8: asymmetric, scale = (hi - lo) / 255, zero_point = clamp(round(-lo / scale), 0, 255).
    int8: symmetric, scale = max(|lo|, |hi|) / 127, zero_point = 0.
    The scale is floored at MIN_SCALE and rounded to float32 (what kernels store) before the
    zero point is derived from it; rounding is half to even, like torch.round.
    """
    if dtype not in QDTYPES:
        raise UserInputError(f"unknown quantized dtype {dtype!r}", f"use one of: {', '.join(QDTYPES)}")
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"invalid quantization range ({lo}, {hi}): need finite lo <= hi")
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    span = (hi - lo) / 255 if dtype == "uint8" else max(-lo, hi) / 127
    scale = float(torch.tensor(max(span, MIN_SCALE), dtype=torch.float32))
    if dtype == "int8":
        return scale, 0
    return scale, int(min(max(round(-lo / scale), 0), 255))


class StreamingHistogram:
    """Equal-width histogram with a fixed number of bins whose range grows to cover every batch.

    Growing merges each k old bins into one new bin (k an integer) with the old edges kept on new
    bin boundaries, so old counts move exactly and memory stays at `bins` counts. After growth a
    bin is at most about twice as wide as the observed range needs (range / bins).
    """

    def __init__(self, bins: int) -> None:
        self.bins = bins
        self.counts = torch.zeros(bins, dtype=torch.float64)
        self.lo = 0.0     # left edge of bin 0
        self.width = 0.0  # bin width; 0 until the first batch

    @property
    def total(self) -> float:
        return float(self.counts.sum())

    def edges(self) -> torch.Tensor:
        return self.lo + self.width * torch.arange(self.bins + 1, dtype=torch.float64)

    def centers(self) -> torch.Tensor:
        return self.lo + self.width * (torch.arange(self.bins, dtype=torch.float64) + 0.5)

    def add(self, x: torch.Tensor) -> None:
        """Count a finite, non-empty 1-D float tensor."""
        bmin, bmax = (float(v) for v in torch.aminmax(x))
        if self.width == 0.0:
            # A constant first batch still needs a non-zero width; later batches may widen it.
            span = bmax - bmin if bmax > bmin else max(abs(bmin), 1.0) * 1e-6
            self.lo, self.width = bmin, span / self.bins
        else:
            self._grow(bmin, bmax)
        # float64 index math so values on an edge land where the edges say; clamp catches the top edge.
        idx = ((x.double() - self.lo) / self.width).floor_().clamp_(0, self.bins - 1).long()
        self.counts += torch.bincount(idx, minlength=self.bins)

    def _grow(self, bmin: float, bmax: float) -> None:
        hi = self.lo + self.bins * self.width
        if bmin >= self.lo and bmax <= hi:
            return
        # How many old-width bins the new data needs on each side, then the smallest integer factor
        # k such that bins * k old widths hold them all.
        left = max(0, math.ceil((self.lo - bmin) / self.width))
        right = max(0, math.ceil((bmax - hi) / self.width))
        k = math.ceil((self.bins + left + right) / self.bins)
        slack = self.bins * k - (self.bins + left + right)
        pad = left + slack * left // (left + right)  # spare room goes to the side(s) that grew
        merged = torch.zeros(self.bins, dtype=torch.float64)
        merged.index_add_(0, (pad + torch.arange(self.bins)) // k, self.counts)
        self.counts, self.lo, self.width = merged, self.lo - pad * self.width, self.width * k

    def quantile(self, q: float) -> float:
        """Value below which a fraction q of the counts lie, linear within a bin (not clamped)."""
        cum = self.counts.cumsum(0)
        target = q * float(cum[-1])
        i = min(int(torch.searchsorted(cum, torch.tensor([target], dtype=torch.float64))[0]), self.bins - 1)
        before = float(cum[i - 1]) if i > 0 else 0.0
        n = float(self.counts[i])
        frac = (target - before) / n if n > 0 else 0.0
        return self.lo + (i + min(max(frac, 0.0), 1.0)) * self.width
