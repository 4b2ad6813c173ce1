"""TensorSpec: what the IR knows about a value without running the model."""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from . import dtypes
from .dims import Dim, DimEntry

MemoryFormat = Literal["contiguous", "channels_last"]


class TensorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dtype: str = Field(description="dtype name, e.g. float32, bfloat16, int64")
    shape: list[DimEntry] = Field(description="ints, or expressions over named dynamic dims")
    memory_format: MemoryFormat = "contiguous"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_(self, **changes) -> "TensorSpec":
        return self.model_copy(update=changes)

    @classmethod
    def of(cls, tensor: torch.Tensor, shape: list[Dim] | None = None) -> "TensorSpec":
        fmt: MemoryFormat = "contiguous"
        if tensor.dim() == 4 and not tensor.is_contiguous() and tensor.is_contiguous(memory_format=torch.channels_last):
            fmt = "channels_last"
        return cls(dtype=dtypes.to_name(tensor.dtype), shape=list(shape if shape is not None else tensor.shape), memory_format=fmt)

    def describe(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        suffix = ", channels_last" if self.memory_format == "channels_last" else ""
        return f"{self.dtype}[{dims}{suffix}]"


class DimRange(BaseModel):
    """The range a named dynamic dim may take at run time (inclusive)."""

    model_config = ConfigDict(extra="forbid")
    min: int
    max: int
