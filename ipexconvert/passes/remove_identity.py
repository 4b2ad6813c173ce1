"""remove_identity: drop identity nodes (eval-mode dropout, clone, alias), reshapes to the
shape their input already has (HF attention reshapes its output to [batch, heads, seq, head_dim]
before transposing it; torch returns such a reshape as a view of its input, so nothing changes),
which would otherwise hide patterns from later passes (fold_attention_quantize), and arithmetic with a
number that changes nothing: `x * 1`, `x / 1` of any dtype, `x + 0`, `x - 0` of an integer one (in floating point
-0.0 + 0 is +0.0), where the result's spec is the input's (no type promotion). Transformers' rotary tables multiply
by `attention_scaling` (1.0) and its masks add a 0 offset to positions: steps a decoder ran on every token."""
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
        if node.op != "identity" and not _no_op_arithmetic(graph, node):
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


_NEUTRAL = {"mul": 1, "div": 1, "add": 0, "sub": 0}  # op -> the number on its right that changes nothing


def _no_op_arithmetic(graph, node) -> bool:
    neutral = _NEUTRAL.get(node.op)
    rhs = node.attrs.get("rhs_scalar") if isinstance(node.attrs, dict) else None
    if neutral is None or len(node.inputs) != 1 or rhs is None or isinstance(rhs, bool) or rhs != neutral:
        return False
    spec = graph.values.get(node.inputs[0])
    if spec is None or spec != graph.values.get(node.outputs[0]):
        return False
    return neutral == 1 or not spec.dtype.startswith(("float", "bfloat"))
