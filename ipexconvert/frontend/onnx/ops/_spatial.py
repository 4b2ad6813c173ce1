"""Padding for convolutions and pools: explicit `pads` or `auto_pad` (static spatial sizes)."""
from __future__ import annotations

from typing import Optional

from ._registry import OnnxNode, Unconvertible


def pads_for(node: OnnxNode, spatial: list, kernel: list[int], strides: list[int], dilations: list[int]) -> list[int]:
    """[begin_0, begin_1, ..., end_0, end_1, ...] as ONNX lays them out."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        return list(node.attr("pads", [0] * (2 * n)))
    if auto == "VALID":
        return [0] * (2 * n)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unconvertible(f"auto_pad {auto}")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        if not isinstance(size, int):
            raise Unconvertible("auto_pad SAME over a dynamic spatial size")
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins + ends


def symmetric(pads: list[int]) -> Optional[list[int]]:
    n = len(pads) // 2
    return pads[:n] if pads[:n] == pads[n:] else None


def torch_pad_order(pads: list[int]) -> list[int]:
    """ONNX [b0, b1, e0, e1] -> F.pad's [b_last, e_last, ..., b0, e0]."""
    n = len(pads) // 2
    out: list[int] = []
    for i in reversed(range(n)):
        out += [pads[i], pads[n + i]]
    return out
