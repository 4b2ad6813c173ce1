"""cache_append: a decoder's `present = cat(past, new, dim=2)` (past a graph input, present a graph output)
becomes kv_append, whose kernels keep the cache in a buffer with room to grow and write only the new
positions (ir/ops/kv_append.py), where cat copies the whole cache every token.

Counts: cache_appends.
"""
from __future__ import annotations

from ..ir import Node, Program
from .base import PassOptions, register_pass

_CAT = "aten.cat.default"


def _is_cache_cat(program: Program, node: Node) -> bool:
    graph = program.graph
    if node.op != "aten" or node.attrs.get("target") != _CAT or len(node.inputs) != 2:
        return False
    args = node.attrs["args"]
    if args[0] != [{"$in": 0}, {"$in": 1}] or len(args) != 2 or args[1] not in (2, -2) or node.attrs.get("kwargs"):
        return False
    past, out = node.inputs[0], node.outputs[0]
    return past in graph.inputs and graph.values[past].rank == 4 and out in graph.outputs


@register_pass("cache_append", "a decoder's cat of its past cache and the new positions -> kv_append (written in place)")
def cache_append(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    changed = 0
    for i, node in enumerate(graph.nodes):
        if _is_cache_cat(program, node):
            graph.nodes[i] = Node(name=node.name, op="kv_append", inputs=list(node.inputs), outputs=list(node.outputs),
                                  attrs={}, source=node.source)
            changed += 1
    return {"cache_appends": changed}
