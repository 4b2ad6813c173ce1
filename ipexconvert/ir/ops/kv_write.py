"""kv_write: new positions written into a static KV cache. inputs: cache [b, heads, capacity, d], new
[b, heads, seq, d], position (int64, 0-d: how many positions the cache holds before these); output: the cache
with new at [position, position + seq) along axis 2 (the same shape as the cache).

Made at load by the static-cache decoding of a GPU (runtime/static_cache.py, from kv_append), never written in
an artifact (internal): the caller owns the cache buffer and guarantees position + seq <= capacity. The value is
torch.index_copy; a kernel may write in place into the cache it is given, which is the point of the op (a fixed
buffer a CUDA graph can be captured over)."""
from __future__ import annotations

import torch

from ..opdef import Arity, OpDef, register_op
from ..spec import TensorSpec
from ._common import expect_dtype, expect_rank, require, same_dim
from ._kv_int8 import head_dim_of, to_cache
from .kv_append import check_cache_dtype


def positions_of(position: torch.Tensor, seq: int) -> torch.Tensor:
    """[position, position + seq) on position's device, without reading it back (capturable)."""
    return position.reshape(1) + torch.arange(seq, device=position.device)


def check_write(cache: TensorSpec, new: TensorSpec, position: TensorSpec, what: str) -> None:
    expect_rank(cache, (4,), what)
    expect_rank(new, (4,), "the new positions")
    check_cache_dtype(cache.dtype, new.dtype, what)
    for axis in (0, 1):
        require(same_dim(cache.shape[axis], new.shape[axis]),
                f"dim {axis} of {what} ({cache.shape[axis]}) and the new positions ({new.shape[axis]}) differ")
    require(same_dim(head_dim_of(cache.dtype, cache.shape[3]), new.shape[3]),
            f"{what} {cache.describe()} does not hold heads of the new positions' {new.shape[3]} values")
    expect_dtype(position, ("int64",), "the write position")
    require(position.rank == 0, f"the write position is {position.describe()}, not a 0-d tensor")


@register_op
class KvWriteOp(OpDef):
    name = "kv_write"
    arity = Arity(3, 3)
    internal = True

    @classmethod
    def infer(cls, inputs, attrs):
        cache, new, position = inputs
        check_write(cache, new, position, "the cache")
        return [TensorSpec(dtype=cache.dtype, shape=list(cache.shape))]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        cache, new, position = inputs
        return cache.index_copy(2, positions_of(position, new.shape[2]), to_cache(new, cache.dtype))
