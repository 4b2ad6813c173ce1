"""The interpreter's values: torch tensors, or Ints for the small integer tensors ONNX graphs compute
shapes with (Shape -> Gather -> Concat -> Reshape).

Ints keep each element as a Python int or a torch.SymInt, so under torch.export a reshape to a
computed shape stays a reshape over symbolic sizes instead of a tensor read back at run time
(which torch.export cannot trace). Integer initializers and constants of rank <= 1 start as Ints;
an op that needs a real tensor calls `tensor(v)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import torch

from .ops._registry import Unconvertible

MAX_INTS = 64  # longer integer vectors are data, not shapes
NEEDS_KNOWN = "must be known when converting"


@dataclass
class Ints:
    values: list  # ints or SymInts, flat
    rank: int = 1  # 0 (a scalar) or 1
    dtype: torch.dtype = torch.int64

    def __post_init__(self):
        if self.rank == 0 and len(self.values) != 1:
            raise ValueError("a rank-0 Ints holds one value")


@dataclass
class Const:
    """A small constant (initializer or Constant node) whose numbers the conversion may read: the tensor
    is captured by the trace as a constant, `numbers` were read before tracing began."""

    tensor: torch.Tensor
    numbers: list

    @classmethod
    def of(cls, t: torch.Tensor) -> "Const":
        return cls(t, t.reshape(-1).tolist())


Value = Union[torch.Tensor, Ints, Const]
MAX_CONST = 64  # elements: larger constants are weights (module buffers)


def constant_value(t: torch.Tensor, as_buffer) -> Value:
    """How an initializer or Constant enters the interpreter: Ints, Const, or (large) a buffer."""
    ints = ints_from_tensor(t)
    if ints is not None:
        return ints
    if t.numel() <= MAX_CONST:
        return Const.of(t)
    return as_buffer(t)


def ints_from_tensor(t: torch.Tensor) -> Optional[Ints]:
    """A real (not traced) integer tensor of rank <= 1 as Ints; None for anything else."""
    if t.dtype not in (torch.int64, torch.int32, torch.bool) or t.dim() > 1 or t.numel() > MAX_INTS:
        return None
    return Ints([v if t.dtype == torch.bool else int(v) for v in t.reshape(-1).tolist()], t.dim(), t.dtype)


def tensor(v: Value) -> torch.Tensor:
    """The value as a tensor (Ints become one; symbolic elements through scalar_tensor + stack)."""
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, Const):
        return v.tensor
    if all(isinstance(x, int) for x in v.values):
        t = torch.tensor(v.values, dtype=v.dtype)
    else:
        t = torch.stack([torch.scalar_tensor(x, dtype=v.dtype) for x in v.values]) if v.values \
            else torch.zeros(0, dtype=v.dtype)
    return t.reshape(()) if v.rank == 0 else t


def known_ints(v: Optional[Value], what: str) -> list:
    """The elements of an input the conversion must know (a shape, axes, pads): Ints only."""
    if isinstance(v, Ints):
        return list(v.values)
    if isinstance(v, Const) and not v.tensor.is_floating_point():
        return [int(x) for x in v.numbers]
    raise Unconvertible(f"{what} {NEEDS_KNOWN} (a constant, or computed from shapes; here it is computed from tensor data)")


def optional_ints(v: Optional[Value], what: str) -> Optional[list]:
    return None if v is None or (isinstance(v, torch.Tensor) and v.numel() == 0 and v.dim() == 1) \
        else known_ints(v, what)


def scalar(v: Optional[Value], what: str, default: Any = None) -> Any:
    """A one-element input as a Python number (Ints, or a real constant tensor); `default` when omitted."""
    if v is None:
        return default
    if isinstance(v, Ints) and len(v.values) == 1:
        return v.values[0]
    if isinstance(v, Const) and len(v.numbers) == 1:
        return v.numbers[0]
    raise Unconvertible(f"{what} {NEEDS_KNOWN} (a one-element constant)")


def rank(v: Value) -> int:
    return v.rank if isinstance(v, Ints) else tensor(v).dim()


def dtype(v: Value) -> torch.dtype:
    return v.dtype if isinstance(v, Ints) else tensor(v).dtype


def broadcast_ints(values: Sequence[Ints]) -> list[list]:
    """Elements of rank-0/1 Ints broadcast to one length (numpy rules for these ranks)."""
    n = max(len(v.values) for v in values)
    out = []
    for v in values:
        if len(v.values) == n:
            out.append(list(v.values))
        elif len(v.values) == 1:
            out.append(list(v.values) * n)
        else:
            raise Unconvertible(f"shapes {[len(x.values) for x in values]} do not broadcast")
    return out
