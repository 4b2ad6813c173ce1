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
from ..ir.ops.kv_append import APPENDS, appended_caches
from .base import PassOptions, register_pass

_ATTENTION_KV = (1, 2)  # sdpa's k and v inputs


@register_pass("kv_cache_bf16", "a decoder's KV cache stored in bf16 beside float32 activations (half the memory "
               "and the bytes attention reads a token)")
def kv_cache_bf16(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    inputs = set(graph.inputs)
    changes: list[tuple[str, Node, int]] = []  # (past input, appending node, its present output's index)
    for node in graph.nodes:
        if node.op not in APPENDS:
            continue
        for slot, out in appended_caches(node.op, node.inputs):
            past, present = node.inputs[slot], node.outputs[out]
            if past not in inputs or graph.values[past].dtype != "float32":
                continue
            _check_only_attention_reads(graph, past, present, node, users)
            changes.append((past, node, out))
    for past, node, out in changes:
        present = node.outputs[out]
        graph.values[past] = graph.values[past].with_(dtype="bfloat16")
        graph.values[present] = graph.values[present].with_(dtype="bfloat16")
    return {"cache_tensors": len(changes)}


def _check_only_attention_reads(graph, past: str, present: str, appender: Node, users) -> None:
    readers = [u for u in users.get(past, []) if u is not appender]
    if readers:
        raise UserInputError(f"--kv-cache bf16: the cache input {past} is also read by {readers[0].name} "
                             f"({readers[0].op}), not only appended to", "convert without --kv-cache bf16")
    if present not in graph.outputs:
        raise UserInputError(f"--kv-cache bf16: the cache {present} is not a graph output (the next call's past)",
                             "convert without --kv-cache bf16")
    for reader in users.get(present, []):
        if reader.op != "sdpa" or any(i == present for n, i in enumerate(reader.inputs) if n not in _ATTENTION_KV):
            raise UserInputError(f"--kv-cache bf16: the cache {present} is read by {reader.name} ({reader.op}), "
                                 "which takes it in float32; only attention reads a bf16 cache",
                                 "convert without --kv-cache bf16")
