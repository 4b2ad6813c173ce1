"""kv_cache_int8: a decoder's KV cache stored as int8 rows (`--kv-cache int8`): a quarter of a float32 cache's bytes,
half of a bfloat16 one's.

A decode step reads every layer's whole cache: Qwen2-0.5B at 4096 positions reads 100 MB of float32 keys and values
a token beside 263 MB of int4 weights. Each cache appended by kv_append or rope_kv_append and read by attention
(float32 or bfloat16) becomes int8 rows of head_dim codes and a float32 scale (ir/ops/_kv_int8.py: per position
and head, symmetric, round half to even): the past input, the present output and the appending node's result, whose
last dim grows by the scale's 4 bytes. The new positions are quantized as they are written; attention reads code *
scale. Everything else computes as before. The same checks as kv_cache_bf16 (a cache something other than attention
reads is a UserInputError naming it). Runs after cache_append and fuse_rope_kv_append, which make the appending nodes.

Counts: cache_tensors.
"""
from __future__ import annotations

from ..ir import Program
from .base import PassOptions, register_pass
from .kv_cache_bf16 import store_caches_as


@register_pass("kv_cache_int8", "a decoder's KV cache stored as int8 rows with a float32 scale per position and head "
               "(a quarter of a float32 cache's memory and bytes read a token)")
def kv_cache_int8(program: Program, options: PassOptions) -> dict[str, int]:
    return {"cache_tensors": store_caches_as(program, "int8", ("float32", "bfloat16"), "--kv-cache int8")}
