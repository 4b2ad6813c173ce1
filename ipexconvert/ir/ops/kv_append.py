"""kv_append: a decoder's KV cache with new positions appended. inputs: past [b, heads, past, d] (a graph
input), new [b, heads, seq, d]; output [b, heads, past + seq, d] (a graph output, the next call's past).

The value is torch.cat([past, new], dim=2); the op says more than cat does: the output becomes the next
call's past, so a kernel may keep the cache in a buffer with room to grow and write only the new
positions (backends/cpu/kernels/kv_append.py), where cat copies the whole cache every token.

The cache may be stored narrower than the activations (a decoder converted with `--kv-cache bf16`: float32
activations, a bfloat16 cache): the new positions are then rounded to the cache's dtype (round half to even) as
they are appended, and the attention reading the cache widens them back exactly (ir/ops/sdpa.py). An int8 cache
(`--kv-cache int8`) holds rows of head_dim codes and a float32 scale (ir/ops/_kv_int8.py): its last dim is head_dim + 4,
the new positions are quantized to such rows as they are appended, and attention reads code * scale."""
from __future__ import annotations

import torch

from ..dims import add
from ..opdef import Arity, OpDef, register_op
from ..spec import TensorSpec
from ._common import expect_rank, require, same_dim
from ._kv_int8 import head_dim_of, to_cache

# (activations, cache) dtype pairs a cache may hold besides the activations' own dtype
NARROWER_CACHES = {("float32", "bfloat16"), ("float32", "int8"), ("bfloat16", "int8")}


# Ops that append to a cache: (past input, present output) of each cache they append to, input positions from the
# end where the inputs before them vary (rope_kv_append's projections). The static-cache rewrite and the
# kv_cache_bf16 pass find a decoder's caches through this one table.
APPENDS = {"kv_append": ((0, 0),), "rope_kv_append": ((-2, 1), (-1, 2))}


def appended_caches(op: str, inputs: list) -> list[tuple[int, int]]:
    """[(past input index, present output index)] of a node of an appending op (APPENDS), indices from 0."""
    return [(i % len(inputs), o) for i, o in APPENDS[op]]


def check_cache_dtype(cache_dtype: str, new_dtype: str, what: str) -> None:
    """A cache holds positions of its own dtype, or of a wider one rounded to it (NARROWER_CACHES)."""
    require(cache_dtype == new_dtype or (new_dtype, cache_dtype) in NARROWER_CACHES,
            f"{what} is {cache_dtype} and the new positions {new_dtype}")


@register_op
class KvAppendOp(OpDef):
    name = "kv_append"
    arity = Arity(2, 2)

    @classmethod
    def infer(cls, inputs, attrs):
        past, new = inputs
        expect_rank(past, (4,), "the past cache")
        expect_rank(new, (4,), "the new positions")
        check_cache_dtype(past.dtype, new.dtype, "the past cache")
        for axis in (0, 1):
            require(same_dim(past.shape[axis], new.shape[axis]),
                    f"dim {axis} of the past cache ({past.shape[axis]}) and the new positions ({new.shape[axis]}) differ")
        require(same_dim(head_dim_of(past.dtype, past.shape[3]), new.shape[3]),
                f"the past cache {past.describe()} does not hold heads of the new positions' {new.shape[3]} values")
        return [TensorSpec(dtype=past.dtype, shape=[*past.shape[:2], add(past.shape[2], new.shape[2]), past.shape[3]])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        past, new = inputs
        return torch.cat([past, to_cache(new, past.dtype)], dim=2)
