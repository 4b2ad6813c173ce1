"""fuse_add_layer_norm: layer_norm(x + residual) becomes one add_layer_norm node.

When the sum is read elsewhere too (pre-norm blocks carry it to the next
residual add, or it is a graph output), the fused node also returns it
(return_sum=True, outputs [norm, sum]) so those readers keep working unchanged.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Node, Program
from ..ir.dims import same
from .base import PassOptions, register_pass


def _same_shape(a: list, b: list) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _unique_name(taken: set[str], base: str) -> str:
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


def _plain_tensor_add(node: Node) -> bool:
    return (node.op == "add" and len(node.inputs) == 2 and None not in node.inputs
            and node.attrs.get("lhs_scalar") is None and node.attrs.get("rhs_scalar") is None)


@register_pass("fuse_add_layer_norm", "fuse a residual add into the layer_norm that follows it")
def fuse_add_layer_norm(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers = graph.producers()
    users = graph.users()
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    replaced: dict[int, Node] = {}  # id(add) -> fused node, which takes the add's place
    doomed: set[int] = set()        # ids of layer_norms folded into a fused node
    names = {n.name for n in graph.nodes}
    fused = with_sum = 0

    for norm in graph.nodes:
        if norm.op != "layer_norm" or len(norm.outputs) != 1:
            continue
        total = norm.inputs[0]
        add: Optional[Node] = producers.get(total)
        if add is None or id(add) in replaced or not _plain_tensor_add(add):
            continue
        # The fused kernel adds element-wise; a residual that needs broadcasting is left alone.
        x, r = add.inputs
        out_shape = graph.values[total].shape
        if not (_same_shape(graph.values[x].shape, out_shape) and _same_shape(graph.values[r].shape, out_shape)):
            continue
        # The fused node sits where the add was (readers of the sum may come before the norm),
        # so weight and bias must exist by then: constants, graph inputs, or produced earlier.
        params = [v for v in norm.inputs[1:3] if v is not None]
        if any(v in producers and position[id(producers[v])] > position[id(add)] for v in params):
            continue
        if total in norm.inputs[1:]:
            continue  # the sum is also the norm's weight or bias: not this pattern
        keep_sum = total in graph.outputs or any(u is not norm for u in users.get(total, []))
        weight = norm.inputs[1] if len(norm.inputs) > 1 else None
        bias = norm.inputs[2] if len(norm.inputs) > 2 else None
        attrs = {"normalized_shape": list(norm.attrs["normalized_shape"]), "eps": float(norm.attrs.get("eps", 1e-5)),
                 "return_sum": keep_sum}
        fused_node = Node(name=_unique_name(names, "add_layer_norm"), op="add_layer_norm",
                          inputs=[x, r, weight, bias],
                          outputs=[norm.outputs[0], total] if keep_sum else [norm.outputs[0]],
                          attrs=attrs, source=norm.source)
        replaced[id(add)] = fused_node
        doomed.add(id(norm))
        fused += 1
        with_sum += keep_sum

    if fused:
        graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in doomed]
        program.prune()
    return {"add_layer_norm_fused": fused, "add_layer_norm_with_sum": with_sum}
