"""remove_identity: drop identity nodes (eval-mode dropout, clone, alias) and reshapes to the
shape their input already has (HF attention reshapes its output to [batch, heads, seq, head_dim]
before transposing it; torch returns such a reshape as a view of its input, so nothing changes),
which would otherwise hide patterns from later passes (fold_attention_quantize)."""
from __future__ import annotations

from ..ir import Program
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, replace_uses


@register_pass("remove_identity", "remove dropout, clone and other identity nodes")
def remove_identity(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    doomed: set[str] = set()
    for node in graph.nodes:
        if node.op == "reshape" and node.outputs[0] not in graph.outputs:
            src, out = node.inputs[0], node.outputs[0]
            if graph.values.get(src) == graph.values[out]:
                replace_uses(graph, out, src)
                doomed.add(node.name)
            continue
        if node.op != "identity":
            continue
        src, out = node.inputs[0], node.outputs[0]
        if out in graph.outputs and (src in graph.inputs or src in program.weights or src in graph.outputs):
            continue  # the copy gives an output its own name; keep it
        if out in graph.outputs:
            # Let the producer write the output name directly.
            for other in graph.nodes:
                other.outputs = [out if o == src else o for o in other.outputs]
                if other is not node:
                    other.inputs = [out if i == src else i for i in other.inputs]
            graph.values[out] = graph.values.get(src, graph.values[out])
        else:
            replace_uses(graph, out, src)
        doomed.add(node.name)
    remove_nodes(program, doomed)
    return {"identities_removed": len(doomed)}
