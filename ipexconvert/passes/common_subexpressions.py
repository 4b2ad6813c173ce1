"""common_subexpressions: a node that repeats an earlier one (same op, attrs and inputs) is dropped and
its readers read the earlier result.

Inputs count as the same when they are the same value, or small constants holding the same numbers
(ONNX exports give every layer its own copy of the attention mask's 0 and -inf, so each layer
rebuilds the same mask). Every IR op is pure, so equal calls give equal results.
"""
from __future__ import annotations

import json
from typing import Hashable

from ..ir import Node, Program
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, replace_uses

_SMALL = 64  # elements: constants compared by value


def _input_key(program: Program, value: str | None) -> Hashable:
    if value is None or not program.is_constant(value):
        return value
    tensor = program.weights[value]
    if tensor.numel() > _SMALL:
        return value
    return ("constant", str(tensor.dtype), tuple(tensor.shape), tuple(tensor.reshape(-1).tolist()))


def _key(program: Program, node: Node) -> Hashable:
    attrs = json.dumps(node.attrs, sort_keys=True, default=str)
    return node.op, attrs, tuple(_input_key(program, i) for i in node.inputs), len(node.outputs)


@register_pass("common_subexpressions", "drop nodes that repeat an earlier node's op, attrs and inputs")
def common_subexpressions(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    first: dict[Hashable, Node] = {}
    doomed: set[str] = set()
    for node in graph.nodes:
        if any(o in graph.outputs for o in node.outputs):
            continue  # a graph output keeps its name
        key = _key(program, node)
        earlier = first.get(key)
        if earlier is None:
            first[key] = node
            continue
        if any(graph.values[a] != graph.values[b] for a, b in zip(node.outputs, earlier.outputs)):
            continue
        for mine, theirs in zip(node.outputs, earlier.outputs):
            replace_uses(graph, mine, theirs)
        doomed.add(node.name)
    remove_nodes(program, doomed)
    return {"nodes_deduplicated": len(doomed)}
