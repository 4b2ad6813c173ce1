"""fold_attention_quantize: sdpa -> permute(0, 2, 1, 3) -> reshape [B, S, H * D] -> quantize
becomes one sdpa that returns the codes, with the views after it on uint8.

In a transformer the attention output is transposed back to [batch, seq, heads, head_dim],
flattened into [batch, seq, hidden] and quantized for the int8 output projection. The native
attention kernel quantizes each output row as it writes it (the bf16 values the quantize node
would have read, the same arithmetic), so the quantize node, its pass over the tensor and the
bf16 tensor itself go away. A SmoothQuant multiplier along the hidden axis (index h * D + d)
moves along as sdpa's fifth input.

Only a chain read by nothing else qualifies: the float attention output must have no other use.

Counts: attention_quantize_folded.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program
from ..ir.dims import same
from .base import PassOptions, register_pass
from .rewrite import absorb_readers, quantize_params, remove_nodes, single_user


def _flatten_chain(graph: Graph, sdpa: Node, users: dict[str, list[Node]]) -> Optional[tuple[Node, Node]]:
    """(permute, reshape) turning sdpa's [B, H, S, D] output into [B, S, H * D], each the only reader
    of the value before it, or None."""
    out = graph.values[sdpa.outputs[0]]
    if out.rank != 4:
        return None
    permute = single_user(graph, sdpa.outputs[0], users)
    if permute is None or permute.op != "permute" or permute.attrs.get("perm") != [0, 2, 1, 3]:
        return None
    reshape = single_user(graph, permute.outputs[0], users)
    if reshape is None or reshape.op != "reshape" or reshape.inputs[0] != permute.outputs[0]:
        return None
    batch, heads, seq, head_dim = out.shape
    flat = graph.values[reshape.outputs[0]].shape
    if not (isinstance(heads, int) and isinstance(head_dim, int) and len(flat) == 3):
        return None
    if not (same(flat[0], batch) and same(flat[1], seq) and flat[2] == heads * head_dim):
        return None
    return permute, reshape


@register_pass("fold_attention_quantize", "attention writes its output quantized for the int8 layer after it")
def fold_attention_quantize(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    doomed: set[str] = set()
    for node in graph.nodes:
        if node.op != "sdpa" or node.attrs.get("quantize") is not None or node.outputs[0] in graph.outputs:
            continue
        chain = _flatten_chain(graph, node, users)
        if chain is None:
            continue
        flat = chain[1].outputs[0]
        readers = users.get(flat, [])
        if not readers or flat in graph.outputs or any(
                r.op != "quantize" or r.inputs[0] != flat or (len(r.inputs) > 1 and r.inputs[1] not in graph.constants)
                for r in readers):
            continue
        keys = {quantize_params(r) for r in readers}
        if len(keys) != 1:
            continue
        (scale, zero_point, dtype, multiplier), = keys
        node.attrs = {**node.attrs, "quantize": {"scale": scale, "zero_point": zero_point, "dtype": dtype}}
        node.inputs = [*node.inputs, *[None] * (4 - len(node.inputs)), *multiplier]
        for value in (node.outputs[0], chain[0].outputs[0], flat):
            graph.values[value] = graph.values[value].with_(dtype=dtype)
        absorb_readers(graph, readers, flat, doomed)
    if doomed:
        remove_nodes(program, doomed)
    return {"attention_quantize_folded": len(doomed)}
