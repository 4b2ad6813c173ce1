"""Calibration observers: each sees batches of one tensor and proposes its int8 clipping range.

Use make_observer(name, **params); qparams_from_range turns a range into (scale, zero_point).
"""
from __future__ import annotations

from . import histogram, minmax, percentile  # noqa: F401  (importing registers them)
from .base import OBSERVERS, QDTYPES, Observer, make_observer, qparams_from_range, register_observer

__all__ = ["Observer", "OBSERVERS", "QDTYPES", "make_observer", "qparams_from_range", "register_observer"]
