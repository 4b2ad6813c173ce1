"""fuse_grouped_attention: grouped-query attention reads its key/value heads directly.

Hugging Face's decoders (Llama, Qwen2, Mistral: fewer key/value heads than query heads) repeat every
key/value head for its group of query heads before attention (`repeat_kv`):

    k_rep = reshape(expand(unsqueeze(k, 2), [b, kv_heads, rep, s, d]), [b, kv_heads * rep, s, d])

which copies the whole KV cache `rep` times per layer and token (Qwen2-0.5B: 7 copies of 530
cached positions, ~90 MB a token over its 24 layers). When both k and v of an sdpa are repeated
with the same `rep`, sdpa reads k and v themselves with `enable_gqa` (query head h attends to
key/value head h // rep, which is what the repeat built); dead_code then drops the views.

Counts: gqa_fused.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program
from ..ir.dims import same
from .base import PassOptions, register_pass
from .rewrite import single_user


def _aten(node: Optional[Node], target: str) -> bool:
    return node is not None and node.op == "aten" and node.attrs.get("target") == target


def _repeated(graph: Graph, value: str, producers, users) -> Optional[tuple[str, int, list[Node]]]:
    """(the unrepeated [b, kv_heads, s, d] value, rep, the view nodes) when `value` is repeat_kv of it."""
    reshape = producers.get(value)
    if reshape is None or reshape.op != "reshape":
        return None
    expand = producers.get(reshape.inputs[0])
    if not _aten(expand, "aten.expand.default") or single_user(graph, expand.outputs[0], users) is not reshape:
        return None
    unsqueeze = producers.get(expand.inputs[0])
    if not _aten(unsqueeze, "aten.unsqueeze.default") or unsqueeze.attrs["args"][1] not in (2, -3) \
            or single_user(graph, unsqueeze.outputs[0], users) is not expand:
        return None
    source = graph.values[unsqueeze.inputs[0]]
    expanded, result = graph.values[expand.outputs[0]], graph.values[value]
    if source.rank != 4 or expanded.rank != 5 or result.rank != 4 or not isinstance(expanded.shape[2], int):
        return None
    b, heads, s, d = source.shape
    rep = expanded.shape[2]
    wanted_expand = [b, heads, rep, s, d]
    if not all(same(x, y) for x, y in zip(expanded.shape, wanted_expand)) or not isinstance(heads, int):
        return None
    if not all(same(x, y) for x, y in zip(result.shape, [b, heads * rep, s, d])):
        return None
    return unsqueeze.inputs[0], rep, [unsqueeze, expand, reshape]


@register_pass("fuse_grouped_attention", "grouped-query attention reads its key/value heads (enable_gqa) instead "
               "of repeated copies")
def fuse_grouped_attention(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers, users = graph.producers(), graph.users()
    fused = 0
    for node in graph.nodes:
        if node.op != "sdpa" or node.attrs.get("enable_gqa"):
            continue
        k = _repeated(graph, node.inputs[1], producers, users)
        v = _repeated(graph, node.inputs[2], producers, users)
        if k is None or v is None or k[1] != v[1] or k[1] < 2:
            continue
        node.inputs = [node.inputs[0], k[0], v[0], *node.inputs[3:]]
        node.attrs = {**node.attrs, "enable_gqa": True}
        fused += 1
    return {"gqa_fused": fused}
