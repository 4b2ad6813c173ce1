"""channels_last: run conv chains in NHWC (channels-last) layout.

oneDNN convolutions are fastest on channels-last activations and weights. Conv
weights are marked channels_last (the executor converts them once at load; the
artifact stores them contiguous), one to_memory_format node converts each
activation entering a conv chain, and value specs record the layout along the
chain. Layout rules below were checked against torch's real behaviour, so every
spec states what the executor produces.
"""
from __future__ import annotations

from ..ir import Node, Program
from ..ir.ops._common import like
from .base import PassOptions, register_pass

CL, CONTIGUOUS = "channels_last", "contiguous"

# Ops whose output keeps the layout of their first input (torch allocates them "like" it).
_PRESERVING = {"batch_norm", "relu", "gelu", "silu", "sigmoid", "tanh", "identity", "to_dtype", "fake_quantize",
               "max_pool2d", "adaptive_avg_pool2d"}
_BINARY = {"add", "sub", "mul", "div"}
_COMMUTATIVE = {"add", "mul"}


@register_pass("channels_last", "channels-last layout for conv chains (weights and activations)")
def channels_last(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    if not any(n.op == "conv2d" for n in graph.nodes):
        return {"conv_weights_channels_last": 0, "layout_conversions_inserted": 0}

    weights_marked = 0
    for node in graph.nodes:
        w = node.inputs[1] if node.op == "conv2d" else None
        if program.is_constant(w) and graph.values[w].rank == 4 and graph.values[w].memory_format != CL:
            graph.values[w] = graph.values[w].with_(memory_format=CL)
            weights_marked += 1

    converted: dict[tuple[str, str], str] = {}  # (value, format) -> converted value name
    inserted = 0
    new_nodes: list[Node] = []

    def fmt(value: str) -> str:
        return graph.values[value].memory_format

    def convert(value: str, memory_format: str) -> str:
        """A node converting `value` to `memory_format`, placed before the current node (once per value)."""
        nonlocal inserted
        key = (value, memory_format)
        if key not in converted:
            name = program.fresh_name(f"{value}_{memory_format}")
            graph.values[name] = like(graph.values[value]).with_(memory_format=memory_format)
            new_nodes.append(Node(name=name, op="to_memory_format", inputs=[value], outputs=[name],
                                  attrs={"memory_format": memory_format}))
            converted[key] = name
            inserted += 1
        return converted[key]

    for node in graph.nodes:
        if node.op == "conv2d" and fmt(node.inputs[0]) != CL:
            node.inputs[0] = convert(node.inputs[0], CL)  # entry into a conv chain
        known = node.op in _PRESERVING | {"conv2d", "to_memory_format"} or (
            node.op in _BINARY and _binary_layout_known(graph, node))
        if not known and any(graph.values[o].rank == 4 for o in node.outputs):
            # No layout rule for this op (or operand order): hand it the contiguous inputs it was
            # traced with, so its output has the layout its spec already states.
            node.inputs = [convert(i, CONTIGUOUS) if i is not None and graph.values[i].rank == 4 and fmt(i) == CL
                           else i for i in node.inputs]
        _set_output_layout(program, node)
        new_nodes.append(node)
    graph.nodes = new_nodes

    # Callers get plain contiguous tensors back.
    produced = graph.producers()
    for out in dict.fromkeys(graph.outputs):
        spec = graph.values[out]
        if out in produced and spec.rank == 4 and spec.memory_format == CL:
            existing = converted.get((out, CONTIGUOUS))
            _convert_output(program, out, existing)
            inserted += existing is None
    return {"conv_weights_channels_last": weights_marked, "layout_conversions_inserted": inserted}


def _binary_layout_known(graph, node: Node) -> bool:
    """Whether we know the layout torch gives this element-wise op, after putting the right operand first.

    torch lays the output out like the first operand when that operand is full-size and
    channels-last (checked for same-shape and broadcast partners). Other mixes can give
    channels-last, contiguous or neither. Swapping add/mul operands is exact and keeps the
    chain channels-last.
    """
    tensors = [i for i in node.inputs if i is not None]
    out_shape = graph.values[node.outputs[0]].shape

    def leads(value: str) -> bool:
        return graph.values[value].memory_format == CL and graph.values[value].shape == out_shape

    if len(tensors) == 2 and node.op in _COMMUTATIVE and leads(tensors[1]) and not leads(tensors[0]):
        node.inputs[0], node.inputs[1] = tensors[1], tensors[0]
        return True
    return leads(tensors[0]) or not any(graph.values[t].memory_format == CL for t in tensors)


def _set_output_layout(program: Program, node: Node) -> None:
    graph = program.graph
    first = next((i for i in node.inputs if i is not None), None)
    if node.op == "to_memory_format":
        layout = node.attrs["memory_format"]
    elif node.op == "conv2d":
        layout = CL  # a channels-last weight (or input) gives a channels-last output
    elif node.op in _PRESERVING and first is not None:
        layout = graph.values[first].memory_format
    elif node.op in _BINARY and first is not None:
        spec = graph.values[first]
        out_shape = graph.values[node.outputs[0]].shape
        layout = CL if spec.memory_format == CL and spec.shape == out_shape else CONTIGUOUS
    else:
        return  # unchanged: its inputs have the layout it was traced with
    for o in node.outputs:
        if graph.values[o].rank == 4:
            graph.values[o] = graph.values[o].with_(memory_format=layout)


def _convert_output(program: Program, out: str, existing: str | None) -> None:
    """Let the producer write an internal name and `out` be its contiguous conversion.

    When a contiguous copy of the value already exists (made for a layout-unknown reader),
    that conversion writes the output name instead of adding a second one.
    """
    graph = program.graph
    internal = program.fresh_name(f"{out}_channels_last")
    graph.values[internal] = graph.values[out]
    rename = {out: internal} if existing is None else {out: internal, existing: out}
    for node in graph.nodes:
        node.inputs = [rename.get(i, i) for i in node.inputs]
        node.outputs = [rename.get(o, o) for o in node.outputs]
    graph.values[out] = graph.values[out].with_(memory_format=CONTIGUOUS)
    if existing is None:
        graph.nodes.append(Node(name=program.fresh_name(f"{out}_contiguous"), op="to_memory_format",
                                inputs=[internal], outputs=[out], attrs={"memory_format": CONTIGUOUS}))
    else:
        del graph.values[existing]
