"""Small helpers shared by op definitions (not an op)."""
from __future__ import annotations

from typing import Annotated, Literal, Optional, Sequence

from pydantic import Field

from ..dims import Dim, add, floordiv, same, simplify
from ..opdef import SpecError
from ..spec import TensorSpec


# 2-D window attrs (conv, pool): a stride, dilation or kernel of 0 divides by zero or indexes out of
# bounds in the kernels, and one past MAX_WINDOW_ATTR is refused by the native kernels (int8_gemm's conv geometry)
# or overflows their int arithmetic, so artifacts holding one are refused when the attrs are parsed.
MAX_WINDOW_ATTR = 1 << 20
Positive2 = Annotated[list[Annotated[int, Field(ge=1, le=MAX_WINDOW_ATTR)]], Field(min_length=2, max_length=2)]
NonNegative2 = Annotated[list[Annotated[int, Field(ge=0, le=MAX_WINDOW_ATTR)]], Field(min_length=2, max_length=2)]


# A dtype name in attrs (to_dtype's target ...): one of dtypes.py's names (tests/ir/test_validate.py keeps them equal),
# so an artifact's string never reaches torch.
DtypeName = Literal["float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"]
FloatDtypeName = Literal["float32", "float16", "bfloat16", "float64"]


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


# ---- input checks of the shape rules (infer): a hostile artifact's specs are refused at load ---------------------------


def window_output_size(size: Dim, kernel: int, stride: int, padding: int, dilation: int) -> Dim:
    """Positions of a sliding window (convolution, pooling) along one axis: floor((size + 2 p - d (k - 1) - 1) / s)
    + 1; an int for an int size (kernels compute their output shapes with it too)."""
    return add(floordiv(add(size, 2 * padding - dilation * (kernel - 1) - 1), stride), 1)


def require(ok: bool, problem: str) -> None:
    """SpecError(problem) unless ok."""
    if not ok:
        raise SpecError(problem)


def same_dim(a: Dim, b: Dim) -> bool:
    """The same size: ints equal, expressions equal once simplified (dims.same)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return same(a, b)


def same_shape(a: Sequence[Dim], b: Sequence[Dim]) -> bool:
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b))


def expect_rank(spec: TensorSpec, ranks: Sequence[int], what: str) -> None:
    require(spec.rank in ranks, f"{what} is {spec.describe()}, not of rank {' or '.join(map(str, ranks))}")


def expect_dtype(spec: TensorSpec, names: Sequence[str], what: str) -> None:
    require(spec.dtype in names, f"{what} is {spec.describe()}, not {' or '.join(names)}")


def expect_shape(spec: Optional[TensorSpec], shape: Sequence[Dim], what: str) -> None:
    """spec (skipped when None: an absent optional input) has exactly this shape."""
    if spec is not None:
        require(same_shape(spec.shape, shape), f"{what} is {spec.describe()}, not of shape {list(shape)}")


def trailing(x: TensorSpec, normalized_shape: Sequence[int], what: str = "the input") -> None:
    """x's last dims are normalized_shape (the norms)."""
    n = len(normalized_shape)
    require(0 < n <= x.rank and same_shape(x.shape[x.rank - n:], normalized_shape),
            f"{what} {x.describe()} does not end in the normalized shape {list(normalized_shape)}")


def broadcast_to(shape: Sequence[Dim], operand: TensorSpec, what: str) -> None:
    """operand broadcasts to `shape` without growing it (a binary post-op operand, an additive mask)."""
    from ..dims import broadcast

    try:
        ok = operand.rank <= len(shape) and same_shape(broadcast(shape, operand.shape), shape)
    except ValueError:
        ok = False
    require(ok, f"{what} {operand.describe()} does not broadcast to {list(shape)}")


def broadcast_base(t):
    """The smallest view of t that t broadcasts from: every dim of stride 0 (an expand) cut to size 1.

    An elementwise op on the base, expanded back to t's shape, gives what it gives on t, without
    materialising the repeats (an attention mask expanded over the query rows: L times the work and
    memory, and a kernel that can no longer tell the rows are one)."""
    index = tuple(slice(0, 1) if stride == 0 and size > 1 else slice(None) for stride, size in zip(t.stride(), t.shape))
    return t[index]


def bias_as_input(bias, x):
    """A float32 bias of a bf16 conv/linear (which infer allows: kernels take either) in x's dtype,
    since torch's conv2d and linear need the two to match."""
    return bias if bias is None or bias.dtype == x.dtype else bias.to(x.dtype)
