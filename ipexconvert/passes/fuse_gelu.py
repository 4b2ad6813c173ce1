"""fuse_gelu: the exact GELU written out with erf becomes one gelu node (which then fuses into the
linear before it as a post-op).

Matched (ONNX exporters and hand-written PyTorch both write these; every intermediate value read
once and not a graph output):

    e = erf(x / 1.41421...)   or   erf(x * 0.70710...)
    y = (x * (e + 1)) * 0.5   or   (x * 0.5) * (e + 1)   (mul operands in either order)
"""
from __future__ import annotations

import math
from typing import Optional

from ..ir import Graph, Node, Program
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, single_user

_TOLERANCE = 1e-6


def _scalar(node: Optional[Node], op: str, value: float) -> bool:
    """A node `op(input, number)` whose number is `value`."""
    if node is None or node.op != op or len(node.inputs) != 1 or node.attrs.get("lhs_scalar") is not None:
        return False
    number = node.attrs.get("rhs_scalar")
    return number is not None and abs(float(number) - value) <= _TOLERANCE * abs(value)


def _erf_input(producers: dict[str, Node], erf: Node) -> Optional[tuple[str, Node]]:
    """(x, the div/mul node) when erf reads x / sqrt(2) or x * (1 / sqrt(2))."""
    scaled = producers.get(erf.inputs[0])
    if _scalar(scaled, "div", math.sqrt(2)) or _scalar(scaled, "mul", 1 / math.sqrt(2)):
        return scaled.inputs[0], scaled
    return None


def _other(node: Optional[Node], value: str) -> Optional[str]:
    """The other operand of a two-tensor mul that reads `value`."""
    if node is None or node.op != "mul" or len(node.inputs) != 2 or value not in node.inputs \
            or node.attrs.get("post_ops"):
        return None
    a, b = node.inputs
    return b if a == value else a


def _match(graph: Graph, erf: Node, producers, users) -> Optional[tuple[str, Node, list[Node]]]:
    """(x, the node whose output becomes gelu(x), nodes that go) for one erf."""
    found = _erf_input(producers, erf)
    if found is None:
        return None
    x, scaled = found
    if single_user(graph, scaled.outputs[0], users) is not erf:
        return None
    plus_one = single_user(graph, erf.outputs[0], users)
    if not _scalar(plus_one, "add", 1.0):
        return None
    product = single_user(graph, plus_one.outputs[0], users)
    other = _other(product, plus_one.outputs[0])
    if other == x:  # (x * (e + 1)) * 0.5
        half = single_user(graph, product.outputs[0], users)
        if _scalar(half, "mul", 0.5):
            return x, half, [scaled, erf, plus_one, product]
        return None
    half_x = producers.get(other) if other is not None else None
    if _scalar(half_x, "mul", 0.5) and half_x.inputs[0] == x:  # (x * 0.5) * (e + 1)
        doomed = [scaled, erf, plus_one]
        if single_user(graph, half_x.outputs[0], users) is product:
            doomed.append(half_x)
        return x, product, doomed
    return None


@register_pass("fuse_gelu", "exact GELU written with erf (x * 0.5 * (1 + erf(x / sqrt 2))) -> one gelu node")
def fuse_gelu(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    fused = 0
    erfs = [n.name for n in graph.nodes if n.op == "aten" and n.attrs.get("target") == "aten.erf.default"]
    for name in erfs:
        producers, users = graph.producers(), graph.users()  # fresh: the last rewrite changed the graph
        erf = next((n for n in graph.nodes if n.name == name), None)
        match = _match(graph, erf, producers, users) if erf is not None else None
        if match is None:
            continue
        x, last, doomed = match
        if graph.values[x].dtype != graph.values[last.outputs[0]].dtype:
            continue
        gelu = Node(name=last.name, op="gelu", inputs=[x], outputs=list(last.outputs),
                    attrs={"approximate": "none"}, source=last.source)
        graph.nodes[graph.nodes.index(last)] = gelu
        remove_nodes(program, {n.name for n in doomed})
        fused += 1
    return {"gelu_fused": fused}
