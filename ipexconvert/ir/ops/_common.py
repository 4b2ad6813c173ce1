"""Small helpers shared by op definitions (not an op)."""
from __future__ import annotations

from typing import Annotated, Optional, Sequence

from pydantic import Field

from ..dims import Dim, simplify
from ..spec import TensorSpec


# 2-D window attrs (conv, pool): a stride, dilation or kernel of 0 divides by zero or indexes out of
# bounds in the kernels, so artifacts holding one are refused when the attrs are parsed.
Positive2 = Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2, max_length=2)]
NonNegative2 = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def like(spec: TensorSpec, shape: Sequence[Dim] | None = None, dtype: str | None = None) -> TensorSpec:
    return TensorSpec(
        dtype=dtype or spec.dtype,
        shape=[simplify(d) for d in (spec.shape if shape is None else shape)],
        memory_format=spec.memory_format if shape is None else "contiguous",
    )


def promote(specs: Sequence[Optional[TensorSpec]]) -> str:
    """torch's type promotion over tensor inputs, by dtype name."""
    import torch

    from .. import dtypes

    present = [dtypes.to_torch(s.dtype) for s in specs if s is not None]
    out = present[0]
    for d in present[1:]:
        out = torch.promote_types(out, d)
    return dtypes.to_name(out)
