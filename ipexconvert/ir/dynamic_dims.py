"""Declared dynamic dims: which input axes may vary at run time, by name and range.

Plain data, frontend-neutral: users and the built-in examples declare them, and each frontend
turns them into what its tracer needs (frontend/torch/dynamic.py: torch.export's dynamic_shapes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol


class DimLike(Protocol):
    name: str
    min: int
    max: int


@dataclass(frozen=True)
class DynamicDim:
    """A named input axis that may vary at run time; inputs sharing a name share its size."""

    name: str
    min: int = 1
    max: int = 4096


# input name -> axis -> dim
DynamicDims = Mapping[str, Mapping[int, DimLike]]
