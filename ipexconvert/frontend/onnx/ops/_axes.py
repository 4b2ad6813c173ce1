"""Axis arguments: from an attribute (older opsets) or an input (newer ones), normalised."""
from __future__ import annotations

from typing import Optional

from ..values import optional_ints
from ._registry import OnnxNode, Unconvertible


def axes_of(node: OnnxNode, inputs: list, index: int, what: str = "axes") -> Optional[list[int]]:
    """The axes attribute, else input `index` when given; None when neither is."""
    if "axes" in node.attrs:
        return list(node.attr("axes"))
    if len(inputs) > index and inputs[index] is not None:
        return optional_ints(inputs[index], what)
    return None


def normalize(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unconvertible(f"axis {axis} is outside a rank-{rank} tensor")
    return axis % rank if rank else 0
