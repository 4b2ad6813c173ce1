"""fold_norm_quantize: add_layer_norm -> quantize becomes one add_layer_norm with a quantized output.

In a post-norm transformer (BERT) each add_layer_norm feeds the next residual add and, through a
quantize node, the int8 linear(s) after it. The norm kernel quantizes each row while it is still
in cache, so the quantize node and its second pass over the tensor go away. The quantized output
is computed from the norm's values in its own dtype, exactly as the quantize node did.

A SmoothQuant multiplier (per channel, a constant input of the quantize node) moves along as the
norm's fifth input. Readers with other parameters or another multiplier than the first one's keep
their quantize node.

Counts: norm_quantize_folded.
"""
from __future__ import annotations

from ..ir import Program
from .base import PassOptions, register_pass
from .rewrite import absorb_readers, quantize_params, remove_nodes


@register_pass("fold_norm_quantize", "add_layer_norm also returns its output quantized for the int8 layer after it")
def fold_norm_quantize(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    doomed: set[str] = set()
    for node in graph.nodes:
        if node.op != "add_layer_norm" or node.attrs.get("quantize") is not None:
            continue
        if len(node.inputs) > 4:
            continue
        readers = [r for r in users.get(node.outputs[0], []) if r.op == "quantize" and r.inputs[0] == node.outputs[0]
                   and (len(r.inputs) == 1 or r.inputs[1] in graph.constants)]
        if not readers:
            continue
        same = [r for r in readers if quantize_params(r) == quantize_params(readers[0])]
        scale, zero_point, dtype, multiplier = quantize_params(readers[0])
        quantized = same[0].outputs[0]
        node.attrs = {**node.attrs, "quantize": {"scale": scale, "zero_point": zero_point, "dtype": dtype}}
        node.inputs = [*node.inputs, *multiplier]
        node.outputs = [*node.outputs, quantized]
        absorb_readers(graph, same, quantized, doomed)  # the first reader's output name stays, now the norm's
    if doomed:
        remove_nodes(program, doomed)
    return {"norm_quantize_folded": len(doomed)}
