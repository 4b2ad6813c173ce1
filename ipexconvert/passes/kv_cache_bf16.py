"""kv_cache_bf16: a decoder's KV cache stored in bfloat16 beside float32 activations (`--kv-cache bf16`).

A decode step reads the whole cache once a layer: Qwen2-0.5B at 2048 positions reads 50 MB of float32 keys and
values a token beside 263 MB of int4 weights, and the cache's memory grows with every position. In bfloat16 both
halve (llama.cpp keeps its cache in 16 bits by default). Each cache appended by kv_append or rope_kv_append and
read by attention becomes bfloat16: the past input, the present output and the appending node's result; the new
positions are rounded to bfloat16 as they are written (round half to even) and attention widens them back
exactly (ir/ops/kv_append.py, ir/ops/sdpa.py). Everything else computes as before.

A float32 cache read by anything but attention (as k or v) and the graph output is a UserInputError naming it: the
option promises a bfloat16 cache, not a partial one. Caches already in bfloat16 (bf16 artifacts) are left alone.
Runs after cache_append and fuse_rope_kv_append, which make the appending nodes.

Counts: cache_tensors.
"""
from __future__ import annotations

from ..errors import UserInputError
from ..ir import Node, Program
from ..ir.ops._kv_int8 import row_width
from ..ir.ops.kv_append import APPENDS, appended_caches
from .base import PassOptions, register_pass

_ATTENTION_KV = (1, 2)  # sdpa's k and v inputs


@register_pass("kv_cache_bf16", "a decoder's KV cache stored in bf16 beside float32 activations (half the memory "
               "and the bytes attention reads a token)")
def kv_cache_bf16(program: Program, options: PassOptions) -> dict[str, int]:
    return {"cache_tensors": store_caches_as(program, "bfloat16", ("float32",), "--kv-cache bf16")}


def store_caches_as(program: Program, cache_dtype: str, from_dtypes: tuple[str, ...], option: str) -> int:
    """Every cache (past input, present output) appended by kv_append / rope_kv_append whose dtype is one of
    `from_dtypes` becomes `cache_dtype` (rows of ir/ops/_kv_int8.py for int8: the last dim grows by the scale).
    Returns how many cache tensors changed; a cache something else reads is a UserInputError naming `option`."""
    graph = program.graph
    users = graph.users()
    inputs = set(graph.inputs)
    changes: list[tuple[str, Node, int]] = []  # (past input, appending node, its present output's index)
    for node in graph.nodes:
        if node.op not in APPENDS:
            continue
        for slot, out in appended_caches(node.op, node.inputs):
            past, present = node.inputs[slot], node.outputs[out]
            if past not in inputs or graph.values[past].dtype not in from_dtypes:
                continue
            _check_only_attention_reads(graph, past, present, node, users, cache_dtype, option)
            changes.append((past, node, out))
    for past, node, out in changes:
        for name in (past, node.outputs[out]):
            spec = graph.values[name]
            graph.values[name] = spec.with_(dtype=cache_dtype,
                                            shape=[*spec.shape[:3], row_width(cache_dtype, spec.shape[3])])
    return len(changes)


def _check_only_attention_reads(graph, past: str, present: str, appender: Node, users, cache_dtype: str,
                                option: str) -> None:
    readers = [u for u in users.get(past, []) if u is not appender]
    if readers:
        raise UserInputError(f"{option}: the cache input {past} is also read by {readers[0].name} "
                             f"({readers[0].op}), not only appended to", f"convert without {option}")
    if present not in graph.outputs:
        raise UserInputError(f"{option}: the cache {present} is not a graph output (the next call's past)",
                             f"convert without {option}")
    for reader in users.get(present, []):
        if reader.op != "sdpa" or any(i == present for n, i in enumerate(reader.inputs) if n not in _ATTENTION_KV):
            raise UserInputError(f"{option}: the cache {present} is read by {reader.name} ({reader.op}), "
                                 f"which takes it in float; only attention reads a cache stored in {cache_dtype}",
                                 f"convert without {option}")
