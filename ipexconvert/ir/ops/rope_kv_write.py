"""rope_kv_write: rope_kv_append for a static KV cache. inputs: rope_kv_append's projections, cos and sin, then
cache_key and cache_value [b, kv_heads, capacity, d] and position (int64, 0-d); outputs: q [b, heads, s, d]
rotated, and the caches with rope(k) and v written at [position, position + s) (kv_write's rule).

Made at load by the static-cache decoding of a GPU (runtime/static_cache.py, from rope_kv_append), never
written in an artifact (internal); a kernel may write in place into the caches it is given."""
from __future__ import annotations

from ..opdef import Arity, OpDef, register_op
from ..spec import TensorSpec
from .kv_write import KvWriteOp, check_write
from .rope_kv_append import RopeKvAppendOp, cache_head_dim, rotated_heads


@register_op
class RopeKvWriteOp(OpDef):
    name = "rope_kv_write"
    arity = Arity(6, 8)
    internal = True

    @classmethod
    def infer(cls, inputs, attrs):
        *rest, cache_key, cache_value, position = inputs
        # rope_kv_append's rules with the caches in the place of the past (whose present is not made here)
        q, _, _ = RopeKvAppendOp.infer([*rest, cache_key, cache_value], attrs)
        for name, cache in (("cache_key", cache_key), ("cache_value", cache_value)):
            new = TensorSpec(dtype=q.dtype, shape=[q.shape[0], cache.shape[1], q.shape[2], q.shape[3]])
            check_write(cache, new, position, name)
        return [q, TensorSpec(dtype=cache_key.dtype, shape=list(cache_key.shape)),
                TensorSpec(dtype=cache_value.dtype, shape=list(cache_value.shape))]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        *projections, cos, sin, cache_key, cache_value, position = inputs
        q, k, v = rotated_heads(projections, cos, sin, cache_key.shape[1], cache_head_dim(cache_key))
        write = KvWriteOp.reference
        return [q, write([cache_key, k, position], None, dims), write([cache_value, v, position], None, dims)]
