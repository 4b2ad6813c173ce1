"""int8_residual: a qconv2d's residual add reads its operand in uint8, so residual streams stay int8.

After `quantize`, a ResNet block ends in qconv2d(h, post_ops=[add(r), relu]) with a float
residual r, and the next block quantizes the float output again. Here the add reads r in
uint8 instead (attrs accum_scale / accum_zero_point; oneDNN sums a uint8 accumulator), taken
from
- the qconv2d producing r, when r is only read as such residual operands (the downsample
  branch): it outputs uint8 itself, with the range the planner calibrated on r (LayerPlan.output);
- else a per-tensor uint8 quantize node already reading r before the add (the identity
  shortcut: the block's own quantized input).
The block's float output is then read only by the next block's quantize node, so
fold_requantize (which runs next) makes the block output uint8 too.

Only [add] or [add, relu] post-ops whose operand has the output's shape qualify: that is what
oneDNN's .binary fuses with a uint8 accumulator.

Counts: residual_uint8 (adds now reading uint8), producer_uint8 (producers now writing uint8).
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program
from ..ir.dims import same
from .base import PassOptions, register_pass

_FLOAT = ("float32", "bfloat16")


def _residual_slot(graph: Graph, node: Node) -> Optional[int]:
    """The input index of the add operand, when `node` is a qconv2d this pass can rewrite."""
    post = node.attrs.get("post_ops", [])
    if node.op != "qconv2d" or node.attrs.get("accum_scale") is not None or not post:
        return None
    if post[0]["kind"] != "add" or post[0].get("operand") is None:
        return None
    if len(post) > 2 or (len(post) == 2 and post[1]["kind"] != "relu"):
        return None
    slot = post[0]["operand"]
    r, y = graph.values[node.inputs[slot]], graph.values[node.outputs[0]]
    if r.dtype not in _FLOAT or r.rank != y.rank or not all(same(a, b) for a, b in zip(r.shape, y.shape)):
        return None  # oneDNN sums an accumulator of the output's shape only (no broadcast)
    return slot


def _requantizable(node: Node) -> bool:
    """A qconv2d with a float output and at most one unary post-op (which fuses with requantization)."""
    post = node.attrs.get("post_ops", [])
    return (node.op == "qconv2d" and node.attrs.get("output_dtype") in _FLOAT
            and len(post) <= 1 and all(q.get("operand") is None for q in post))


@register_pass("int8_residual", "residual adds of int8 convs read a uint8 operand, so residual streams stay int8")
def int8_residual(program: Program, options: PassOptions) -> dict[str, int]:
    quantization = options.quantization
    layers = quantization.plan.layers if quantization is not None else {}
    graph = program.graph
    users, producers = graph.users(), graph.producers()
    position = {n.name: i for i, n in enumerate(graph.nodes)}
    slots = {n.name: s for n in graph.nodes if (s := _residual_slot(graph, n)) is not None}
    converted: dict[str, tuple[str, float, int]] = {}  # residual value -> (uint8 value, scale, zero point)
    counts = {"residual_uint8": 0, "producer_uint8": 0}

    def only_residual_reads(r: str) -> bool:
        readers = users.get(r, [])
        return (bool(readers) and r not in graph.outputs
                and all(n.name in slots and n.inputs.count(r) == 1 and n.inputs[slots[n.name]] == r
                        for n in readers))

    def uint8_source(r: str, reader: Node) -> Optional[tuple[str, float, int]]:
        if r in converted:
            return converted[r]
        p = producers.get(r)
        layer = layers.get(p.name) if p is not None else None
        out = layer.output if layer is not None else None
        if out is not None and out.dtype == "uint8" and _requantizable(p) and only_residual_reads(r):
            p.attrs = {**p.attrs, "output_dtype": "uint8", "output_scale": out.scale,
                       "output_zero_point": out.zero_point}
            graph.values[r] = graph.values[r].with_(dtype="uint8")
            counts["producer_uint8"] += 1
            converted[r] = (r, out.scale, out.zero_point)
            return converted[r]
        for q in users.get(r, []):  # one that runs before the reader, so the node order stays valid
            if (q.op == "quantize" and len(q.inputs) == 1 and q.attrs.get("dtype", "uint8") == "uint8"
                    and position[q.name] < position[reader.name]):
                return q.outputs[0], q.attrs["scale"], q.attrs.get("zero_point", 0)
        return None

    for node in graph.nodes:
        slot = slots.get(node.name)
        found = None if slot is None else uint8_source(node.inputs[slot], node)
        if found is None:
            continue
        value, scale, zero_point = found
        node.inputs = [*node.inputs[:slot], value, *node.inputs[slot + 1:]]
        node.attrs = {**node.attrs, "accum_scale": scale, "accum_zero_point": zero_point}
        counts["residual_uint8"] += 1
    program.prune()
    return counts
