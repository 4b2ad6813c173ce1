"""merge_linears: linears reading the same input become one GEMM plus a slice per original output.

BERT's Q, K and V are three [768 x 768] GEMMs on one activation; merged they are one
[2304 x 768] GEMM. At small row counts (batch 1 x seq 128) every call pays a fixed cost,
so one bigger call is cheaper. Works for float `linear` and for `qlinear` with a float
output (int8 weights and their per-channel scales concatenate the same way).

A group: the same input value (not a constant), constant 2-D weights of one dtype and
in-features, the same attrs (so the same unary-only post-ops, and for qlinear the same input
scale, zero point and float output dtype), constant biases (absent ones become zeros).
Binary post-ops read per-node operands and uint8 outputs are requantized per node, so those
stay alone. Weight-only codes chosen before the passes (PassOptions.weight_codes: GPTQ / AWQ) follow
the weights: linears merge only with linears whose codes have the same format (or that have none), and
the merged weight gets the members' codes, rows concatenated like the weights.

The merged node sits where the group's first member was (its input exists there and every
member's reader comes later); each member becomes an `aten.slice.Tensor` of the last dim
with the member's name and output value, so readers are untouched.

Slices are views, not copies. Like the outputs of permute/reshape, their spec keeps
memory_format "contiguous" (the logical layout) while the tensor is strided, which every
kernel handles: the native ones check is_contiguous() per call and fall back to the
reference, the oneDNN linear/qlinear take strided input (checked: bit-identical), and
reshape/permute/sdpa are torch calls. Only readers that reinterpret memory (aten
view/as_strided) would misread a view: they block the merge, and so does a member output
that is a graph output (the user would get a strided tensor).

Counts: groups_merged, linears_merged.
"""
from __future__ import annotations

from functools import reduce
from typing import Optional

import torch

from ..ir import Node, Program
from ..ir.opdef import get_op
from .base import PassOptions, register_pass

_FLOAT_OUTPUTS = {"float32", "bfloat16"}
_BIAS_SLOT = {"linear": 2, "qlinear": 3}  # qlinear: [x, weight, weight_scale, bias]
_REINTERPRETS_MEMORY = ("aten.view.", "aten._unsafe_view.", "aten.as_strided")


def _group_key(program: Program, node: Node, users: dict[str, list[Node]], options: PassOptions) -> Optional[tuple]:
    """What a merge partner must share with `node`, or None when it cannot be merged."""
    graph, values = program.graph, program.graph.values
    if node.op not in _BIAS_SLOT or len(node.outputs) != 1:
        return None
    attrs = get_op(node.op).parse_attrs(node.attrs)
    x, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    bias_slot = _BIAS_SLOT[node.op]
    bias = node.inputs[bias_slot] if len(node.inputs) > bias_slot else None
    if (x is None or program.is_constant(x) or not program.is_constant(w) or values[w].rank != 2
            or len(node.inputs) > bias_slot + 1  # post-op operands
            or any(p.operand is not None for p in attrs.post_ops)
            or (bias is not None and not program.is_constant(bias)) or y in graph.outputs):
        return None
    if any(r.op == "aten" and r.attrs.get("target", "").startswith(_REINTERPRETS_MEMORY) for r in users.get(y, [])):
        return None
    if node.op == "qlinear":
        scale = node.inputs[2]
        if (attrs.output_dtype not in _FLOAT_OUTPUTS or values[w].dtype != "int8" or not program.is_constant(scale)
                or values[scale].dtype != "float32" or values[scale].rank != 1):
            return None
    codes = options.weight_codes.format_of(w) if options.weight_codes is not None else None
    return node.op, x, values[w].dtype, values[w].shape[1], values[y].dtype, attrs.model_dump_json(), codes


def _merge(program: Program, group: list[Node], options: PassOptions) -> list[Node]:
    """One node for the group, then one last-dim slice per member, writing the member's output value."""
    graph, weights = program.graph, program.weights
    first = group[0]
    sizes = [weights[n.inputs[1]].shape[0] for n in group]
    inputs = [first.inputs[0], program.add_constant(f"{first.inputs[1]}_merged",
                                                    torch.cat([weights[n.inputs[1]] for n in group]))]
    if options.weight_codes is not None:
        options.weight_codes.concat(inputs[1], [n.inputs[1] for n in group])
    if first.op == "qlinear":
        scales = torch.cat([weights[n.inputs[2]] for n in group])
        inputs.append(program.add_constant(f"{first.inputs[2]}_merged", scales))
    slot = _BIAS_SLOT[first.op]
    biases = [weights[n.inputs[slot]] if len(n.inputs) > slot and n.inputs[slot] is not None else None for n in group]
    present = [b for b in biases if b is not None]
    if present:
        dtype = reduce(torch.promote_types, [b.dtype for b in present])  # never narrows a bias
        bias = torch.cat([torch.zeros(size, dtype=dtype) if b is None else b.to(dtype) for b, size in zip(biases, sizes)])
        inputs.append(program.add_constant(f"{first.inputs[slot]}_merged", bias))
    else:
        inputs.append(None)

    spec = graph.values[first.outputs[0]]
    y = program.fresh_name(f"{first.outputs[0]}_merged")
    graph.values[y] = spec.with_(shape=[*spec.shape[:-1], sum(sizes)])
    nodes = [Node(name=program.fresh_name(f"{first.name}_merged"), op=first.op, inputs=inputs, outputs=[y],
                  attrs=dict(first.attrs), source=first.source)]
    start = 0
    for node, size in zip(group, sizes):
        # The slice takes the member's name too: the quantization plan and `inspect` know layers by node name.
        nodes.append(Node(name=node.name, op="aten", inputs=[y], outputs=node.outputs,
                          attrs={"target": "aten.slice.Tensor", "args": [{"$in": 0}, -1, start, start + size]},
                          source=node.source))
        start += size
    return nodes


@register_pass("merge_linears", "linears reading one input become one GEMM plus slices (Q/K/V)")
def merge_linears(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    groups: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        key = _group_key(program, node, users, options)
        if key is not None:
            groups.setdefault(key, []).append(node)
    groups_by_first = {g[0].name: g for g in groups.values() if len(g) > 1}
    merged = {n.name for g in groups_by_first.values() for n in g}
    if not merged:
        return {"groups_merged": 0, "linears_merged": 0}

    new_nodes: list[Node] = []
    for node in graph.nodes:
        if node.name in groups_by_first:
            new_nodes.extend(_merge(program, groups_by_first[node.name], options))
        elif node.name not in merged:
            new_nodes.append(node)
    graph.nodes = new_nodes
    program.prune()  # the members' own weights, unless something else reads them
    return {"groups_merged": len(groups_by_first), "linears_merged": len(merged)}
