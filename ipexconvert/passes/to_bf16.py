"""to_bf16: run the program in bfloat16 while its signature stays float32.

Float32 graph inputs are cast to bf16 on entry and float32 outputs cast back on exit.
bf16 compute starts at those inputs and at embedding lookups into a float32 table, and
spreads to every node reading a bf16 value; such nodes get bf16 constants (weights,
biases), and their float32 to_dtype targets and aten dtype arguments become bf16.

Float side computations that never read an activation (rotary angles from positions,
masks built from token ids) stay float32 until they meet a bf16 value, where one cast
is inserted: bf16 cannot even represent positions above 256 exactly, so computing
cos(position * inv_freq) in bf16 would scramble long sequences.

Norm weights and batch-norm statistics stay float32: the norm references upcast anyway.
"""
from __future__ import annotations

from typing import Any

import torch

from ..ir import Node, Program
from .base import PassOptions, register_pass

F32, BF16 = "float32", "bfloat16"

# Inputs kept float32 (by slot): norm weights/biases and running statistics; a weight-only layer's scales and bias
# (its op takes them in float32 whatever x is).
KEEP_FP32_SLOTS = {"batch_norm": {1, 2, 3, 4}, "layer_norm": {1, 2}, "add_layer_norm": {2, 3}, "rms_norm": {1},
                   "woq_linear": {2, 4}}


def _to_bf16_dtype_args(value: Any) -> Any:
    """aten arguments with every {"$dtype": "float32"} turned into bfloat16."""
    if isinstance(value, dict):
        if value == {"$dtype": F32}:
            return {"$dtype": BF16}
        return {k: _to_bf16_dtype_args(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_bf16_dtype_args(v) for v in value]
    return value


@register_pass("to_bf16", "bfloat16 compute with float32 inputs and outputs")
def to_bf16(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    if _already_converted(program):
        return {"weights_to_bf16": 0, "casts_inserted": 0}

    original_dtype = {name: spec.dtype for name, spec in graph.values.items()}
    new_nodes: list[Node] = []
    bf16_twin: dict[str, str] = {}  # float32 value -> its bf16 cast

    def cast(value: str, dtype: str, out: str | None = None) -> str:
        out = out or program.fresh_name(f"{value}_{'bf16' if dtype == BF16 else 'fp32'}")
        graph.values[out] = graph.values[value].with_(dtype=dtype)
        new_nodes.append(Node(name=program.fresh_name(f"to_{dtype}"), op="to_dtype", inputs=[value],
                              outputs=[out], attrs={"dtype": dtype}))
        return out

    def twin(value: str) -> str:
        if value not in bf16_twin:
            bf16_twin[value] = cast(value, BF16)
        return bf16_twin[value]

    # Entry casts; every reader of a float32 input reads the bf16 copy.
    read = {i for n in graph.nodes for i in n.inputs}
    for x in graph.inputs:
        if graph.values[x].dtype == F32 and x in read:
            twin(x)
    for node in graph.nodes:
        node.inputs = [bf16_twin.get(i, i) if i is not None else None for i in node.inputs]

    constant_uses: dict[str, list[tuple[Node, int]]] = {}  # float32 constant -> slots that want bf16
    for node in graph.nodes:
        keep = KEEP_FP32_SLOTS.get(node.op, set())
        float_slots = [s for s, v in enumerate(node.inputs)
                       if v is not None and s not in keep and graph.values[v].dtype == F32]
        reads_bf16 = any(v is not None and graph.values[v].dtype == BF16 for v in node.inputs)
        looks_up = node.op == "embedding" and 0 in float_slots and program.is_constant(node.inputs[0])
        if reads_bf16 or looks_up:
            for s in float_slots:
                v = node.inputs[s]
                if program.is_constant(v):
                    constant_uses.setdefault(v, []).append((node, s))
                else:
                    node.inputs[s] = twin(v)  # a float32 side computation meets bf16 activations
            _convert_node(program, node)
        new_nodes.append(node)
    graph.nodes = new_nodes

    weights = _convert_constants(program, constant_uses)

    # Exit casts: the producer writes an internal name, the cast writes the output name.
    exits = 0
    produced = graph.producers()
    for out in dict.fromkeys(graph.outputs):
        if out in produced and graph.values[out].dtype == BF16 and original_dtype.get(out) == F32:
            internal = program.fresh_name(f"{out}_bf16")
            graph.values[internal] = graph.values[out]
            for node in graph.nodes:
                node.inputs = [internal if i == out else i for i in node.inputs]
                node.outputs = [internal if o == out else o for o in node.outputs]
            cast(internal, F32, out=out)
            exits += 1
    graph.nodes = new_nodes
    return {"weights_to_bf16": weights, "casts_inserted": len(bf16_twin) + exits}


def _already_converted(program: Program) -> bool:
    """Edge casts from an earlier run: a bf16 cast of an input, or a float32 cast of bf16 into an output."""
    graph = program.graph
    for n in graph.nodes:
        if n.op != "to_dtype":
            continue
        if n.attrs.get("dtype") == BF16 and n.inputs[0] in graph.inputs:
            return True
        if n.attrs.get("dtype") == F32 and n.outputs[0] in graph.outputs and graph.values[n.inputs[0]].dtype == BF16:
            return True
    return False


def _convert_node(program: Program, node: Node) -> None:
    """Make a node that reads bf16 compute in bf16: float32 dtype targets and outputs become bf16."""
    graph = program.graph
    if node.op == "to_dtype" and node.attrs.get("dtype") == F32:
        node.attrs = {**node.attrs, "dtype": BF16}
    if node.op == "aten":
        node.attrs = {**node.attrs, "args": _to_bf16_dtype_args(node.attrs.get("args", [])),
                      "kwargs": _to_bf16_dtype_args(node.attrs.get("kwargs", {}))}
    for o in node.outputs:
        if graph.values[o].dtype == F32:
            graph.values[o] = graph.values[o].with_(dtype=BF16)


def _convert_constants(program: Program, uses: dict[str, list[tuple[Node, int]]]) -> int:
    """Cast constants to bf16 in place, or add a bf16 copy when float32 readers remain."""
    graph = program.graph
    readers: dict[str, int] = {}
    for node in graph.nodes:
        for v in node.inputs:
            if v in uses:
                readers[v] = readers.get(v, 0) + 1
    converted = 0
    for name, slots in uses.items():
        tensor = program.weights[name].to(torch.bfloat16)
        spec = graph.values[name].with_(dtype=BF16)  # keeps a channels_last mark
        if readers[name] == len(slots) and name not in graph.outputs:
            program.weights[name] = tensor
            graph.values[name] = spec
        else:
            copy = program.add_constant(f"{name}_bf16", tensor)
            graph.values[copy] = spec
            for node, s in slots:
                node.inputs[s] = copy
        converted += 1
    return converted
