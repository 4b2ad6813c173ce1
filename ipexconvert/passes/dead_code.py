"""dead_code: drop nodes whose outputs nobody reads, and constants nobody uses."""
from __future__ import annotations

from ..ir import Program
from .base import PassOptions, register_pass


@register_pass("dead_code", "remove nodes and weights that do not contribute to an output")
def dead_code(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs):
            kept.append(node)
            live.update(i for i in node.inputs if i is not None)
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept[::-1]
    before = len(program.weights)
    program.prune()
    return {"nodes_removed": removed, "weights_removed": before - len(program.weights)}
