"""Mappers shared by the element-wise ops (each op still has its own file)."""
from __future__ import annotations

from typing import Any

from ._registry import Args, Converted, Unconvertible


def to_unary(target: str, args: Args) -> Converted:
    return [args["self"]], {}


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool)) and not hasattr(v, "meta")


def to_binary(target: str, args: Args) -> Converted:
    """tensor op tensor, or tensor op python number (the number becomes the rhs_scalar attr)."""
    if args.get("alpha", 1) != 1:
        raise Unconvertible("alpha != 1")
    lhs, rhs = args["self"], args["other"]
    if _is_scalar(lhs):
        raise Unconvertible("scalar lhs")
    if _is_scalar(rhs):
        return [lhs], {"rhs_scalar": rhs}
    if not _is_tensor(rhs):
        raise Unconvertible("a symbolic size as operand")  # x + x.shape[1]: the aten fallback takes it ($sym)
    return [lhs, rhs], {}


def _is_tensor(v: Any) -> bool:
    val = getattr(v, "meta", {}).get("val")
    return val is not None and hasattr(val, "dim")
