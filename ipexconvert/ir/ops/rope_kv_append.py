"""rope_kv_append: a decoder layer's attention inputs in one step: q and k rotated (rope), k and v appended to
the KV cache (kv_append), read straight from the q/k/v projections.

inputs: the projections, either one merged tensor qkv [b, s, (heads + 2 * kv_heads) * d] (q, k and v
column ranges, merge_linears' form) or three, q [b, s, heads * d], k and v [b, s, kv_heads * d]; then cos and
sin [b or 1, 1, s, d] (as rope's), past_key and past_value [b, kv_heads, past, d] (graph inputs).
outputs: q [b, heads, s, d] rotated; present_key [b, kv_heads, past + s, d] = cat(past_key, rope(k)) and
present_value = cat(past_value, v) (graph outputs, the next call's past).

The value is what the fused nodes computed: heads split off by reshape [b, s, heads, d] and permute [0, 2, 1, 3],
rope (float32 math, one rounding to the projection's dtype) and kv_append. As with kv_append, a kernel may keep
the cache in a buffer with room to grow and write only the new positions, and the cache may be narrower than the
projections (float32 projections, a bfloat16 cache: k and v rounded to it as they are written; or an int8 cache, whose rows of
head_dim codes and a scale are made from k and v as they are written: ir/ops/_kv_int8.py)."""
from __future__ import annotations

import torch

from .. import dtypes
from ..dims import add
from ..opdef import Arity, OpDef, SpecError, register_op
from ..spec import TensorSpec
from ._common import expect_dtype, expect_rank, require, same_dim
from ._kv_int8 import head_dim_of, to_cache
from .kv_append import check_cache_dtype
from .rope import RopeOp


def split_inputs(inputs: list) -> tuple[list, list]:
    """(the projections: [qkv] or [q, k, v]; [cos, sin, past_key, past_value])."""
    return inputs[:-4], inputs[-4:]


def query_heads(projections: list, kv_heads: int, head_dim: int) -> int:
    """The query heads the projections hold, from their last dims (shapes of TensorSpecs or tensors)."""
    if len(projections) == 1:
        return projections[0][-1] // head_dim - 2 * kv_heads
    return projections[0][-1] // head_dim


def heads_of(x: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """[b, s, heads * d] -> [b, heads, s, d] (a view)."""
    return x.reshape(x.shape[0], x.shape[1], heads, head_dim).permute(0, 2, 1, 3)


def split_projections(projections: list, heads: int, kv_heads: int, head_dim: int) -> list[torch.Tensor]:
    """[q, k, v] as [b, s, n * d] tensors (column slices of a merged qkv: views)."""
    if len(projections) == 3:
        return list(projections)
    q_end, k_end = heads * head_dim, (heads + kv_heads) * head_dim
    qkv = projections[0]
    return [qkv[..., :q_end], qkv[..., q_end:k_end], qkv[..., k_end:]]


def cache_head_dim(cache: torch.Tensor) -> int:
    """The head size a cache tensor holds (its last dim, less an int8 row's scale)."""
    return head_dim_of(dtypes.to_name(cache.dtype), cache.shape[3])


def rotated_heads(projections: list, cos, sin, kv_heads: int, head_dim: int) -> tuple:
    """(rope(q), rope(k), v) as [b, heads, s, d] tensors, from the projections."""
    heads = query_heads([p.shape for p in projections], kv_heads, head_dim)
    q, k, v = split_projections(projections, heads, kv_heads, head_dim)
    q, k, v = heads_of(q, heads, head_dim), heads_of(k, kv_heads, head_dim), heads_of(v, kv_heads, head_dim)
    rope = RopeOp.reference
    return rope([q, cos, sin], None, {}), rope([k, cos, sin], None, {}), v


@register_op
class RopeKvAppendOp(OpDef):
    name = "rope_kv_append"
    arity = Arity(5, 7)

    @classmethod
    def infer(cls, inputs, attrs):
        projections, (cos, sin, past_key, past_value) = split_inputs(list(inputs))
        require(len(projections) in (1, 3), f"rope_kv_append reads 5 or 7 inputs, not {len(inputs)}")
        for name, past in (("past_key", past_key), ("past_value", past_value)):
            expect_rank(past, (4,), name)
        require(past_key.shape == past_value.shape and past_key.dtype == past_value.dtype,
                f"past_key {past_key.describe()} and past_value {past_value.describe()} differ")
        batch, kv_heads, past, width = past_key.shape
        d = head_dim_of(past_key.dtype, width)
        require(isinstance(kv_heads, int) and kv_heads >= 1 and isinstance(d, int) and d >= 2 and d % 2 == 0,
                f"the cache {past_key.describe()} needs a fixed head count and a fixed even head size")
        for p in projections:
            expect_rank(p, (3,), "a projection")
            expect_dtype(p, ("float32", "bfloat16"), "a projection")
            require(p.dtype == projections[0].dtype, f"the projections {[p.describe() for p in projections]} differ in dtype")
            check_cache_dtype(past_key.dtype, p.dtype, f"the cache {past_key.describe()}")
            require(same_dim(p.shape[0], batch) and same_dim(p.shape[1], projections[0].shape[1]) and isinstance(p.shape[2], int)
                    and p.shape[2] % d == 0, f"the projection {p.describe()} is not [{batch}, seq, heads * {d}]")
        heads = query_heads([p.shape for p in projections], kv_heads, d)
        require(heads >= 1, f"the projections {[p.describe() for p in projections]} hold no query heads "
                            f"beside {kv_heads} key and value heads of {d}")
        if len(projections) == 3:
            require(projections[1].shape[2] == kv_heads * d and projections[2].shape[2] == kv_heads * d,
                    f"k and v must hold {kv_heads} heads of {d}")
        seq = projections[0].shape[1]
        x = TensorSpec(dtype=projections[0].dtype, shape=[batch, heads, seq, d])
        RopeOp.infer([x, cos, sin], None)  # the table checks of rope
        present = TensorSpec(dtype=past_key.dtype, shape=[batch, kv_heads, add(past, seq), width])
        return [x, present, present]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        projections, (cos, sin, past_key, past_value) = split_inputs(list(inputs))
        q, k, v = rotated_heads(projections, cos, sin, past_key.shape[1], cache_head_dim(past_key))
        return [q, torch.cat([past_key, to_cache(k, past_key.dtype)], dim=2),
                torch.cat([past_value, to_cache(v, past_value.dtype)], dim=2)]
