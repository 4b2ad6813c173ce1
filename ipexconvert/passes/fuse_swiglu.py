"""fuse_swiglu: a SwiGLU MLP's gate, `mul(silu(gate), up)`, becomes one silu_mul node.

Where the gate and up projections are one merged GEMM (the weight-only pipeline merges them before post-ops
are fused, so the weights are read once), silu and mul read two slices of its output and stay two
element-wise passes and two kernel calls per layer; silu_mul reads both halves once and writes the product.
Matched: a mul of two tensors of the same shape and dtype, one of them a silu's output that nothing else
reads (not a graph output). Counts: swiglu_fused.
"""
from __future__ import annotations

from ..ir import Node, Program
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, single_user


@register_pass("fuse_swiglu", "mul(silu(gate), up) of a SwiGLU MLP -> one silu_mul node")
def fuse_swiglu(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers, users = graph.producers(), graph.users()
    values = graph.values
    doomed: set[str] = set()
    fused = 0
    for i, node in enumerate(graph.nodes):
        if node.op != "mul" or len(node.inputs) != 2 or node.attrs.get("post_ops") or None in node.inputs:
            continue
        for gate_side in (0, 1):
            silu = producers.get(node.inputs[gate_side])
            up = node.inputs[1 - gate_side]
            if (silu is None or silu.op != "silu" or silu.name in doomed or silu.attrs.get("post_ops")
                    or single_user(graph, silu.outputs[0], users) is not node):
                continue
            gate = silu.inputs[0]
            specs = [values[gate], values[up], values[node.outputs[0]]]
            if len({(tuple(map(str, s.shape)), s.dtype) for s in specs}) != 1:
                continue
            graph.nodes[i] = Node(name=node.name, op="silu_mul", inputs=[gate, up], outputs=list(node.outputs),
                                  source=node.source)
            doomed.add(silu.name)
            fused += 1
            break
    remove_nodes(program, doomed)
    return {"swiglu_fused": fused}
