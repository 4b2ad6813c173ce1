"""fuse_rms_norm: the RMSNorm that models write by hand becomes one rms_norm node.

Matches   x -> pow(x, 2) -> mean(-1, keepdim) -> add(eps) -> rsqrt -> mul(x, .) [-> mul(weight, .)]
(the Llama/T5 form, exported as core-ATen fallbacks), where every intermediate has a
single reader. The weight, when present, must be a 1-D constant over the last dim.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Node, Program
from ..ir.opdef import get_op
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, single_user


def _aten(node: Optional[Node], target: str) -> bool:
    return node is not None and node.op == "aten" and node.attrs.get("target") == target


def _other_input(node: Node, value: str) -> Optional[str]:
    """The input of a two-tensor mul that is not `value`."""
    if node.op != "mul" or len(node.inputs) != 2 or node.attrs.get("lhs_scalar") is not None \
            or node.attrs.get("rhs_scalar") is not None or value not in node.inputs:
        return None
    a, b = node.inputs
    return b if a == value else a


def _match(program: Program, pow_node: Node, users) -> Optional[tuple[str, Optional[str], float, list[Node], Node]]:
    """(x, weight, eps, nodes to remove, last node) when pow_node starts an RMSNorm."""
    graph = program.graph
    args = pow_node.attrs.get("args", [])
    if len(args) != 2 or args[1] != 2:
        return None
    x = pow_node.inputs[0]
    shape = graph.values[x].shape
    if not shape or not isinstance(shape[-1], int) or not graph.values[x].dtype.startswith("float"):
        return None
    mean = single_user(graph, pow_node.outputs[0], users)
    if not _aten(mean, "aten.mean.dim") or mean.attrs["args"][1:] not in ([[-1], True], [[len(shape) - 1], True]) \
            or mean.attrs.get("kwargs"):
        return None
    add = single_user(graph, mean.outputs[0], users)
    if add is None or add.op != "add" or add.attrs.get("rhs_scalar") is None or len(add.inputs) != 1:
        return None
    rsqrt = single_user(graph, add.outputs[0], users)
    if not _aten(rsqrt, "aten.rsqrt.default"):
        return None
    scale = single_user(graph, rsqrt.outputs[0], users)
    if scale is None or _other_input(scale, rsqrt.outputs[0]) != x:
        return None
    chain, last, weight = [pow_node, mean, add, rsqrt], scale, None
    reader = single_user(graph, scale.outputs[0], users)
    w = _other_input(reader, scale.outputs[0]) if reader is not None else None
    if w is not None and program.is_constant(w) and graph.values[w].shape == [shape[-1]] \
            and graph.values[w].dtype == graph.values[x].dtype:
        chain.append(scale)
        last, weight = reader, w
    return x, weight, float(add.attrs["rhs_scalar"]), chain, last


@register_pass("fuse_rms_norm", "replace hand-written RMSNorm (pow/mean/rsqrt/mul) with one rms_norm node")
def fuse_rms_norm(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    doomed: set[str] = set()
    fused = 0
    for node in list(graph.nodes):
        if not _aten(node, "aten.pow.Tensor_Scalar") or node.name in doomed:
            continue
        found = _match(program, node, users)
        if found is None:
            continue
        x, weight, eps, chain, last = found
        attrs = get_op("rms_norm").parse_attrs({"normalized_shape": [graph.values[x].shape[-1]], "eps": eps})
        # The last node of the pattern becomes the rms_norm, so its output name and position stay.
        last.op, last.inputs, last.attrs = "rms_norm", [x, weight], attrs.model_dump()
        doomed.update(n.name for n in chain)
        fused += 1
    remove_nodes(program, doomed)
    return {"rms_norm_fused": fused}
