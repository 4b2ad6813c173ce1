"""fuse_rope: the rotate-half rotary embedding written out (Hugging Face's apply_rotary_pos_emb for Llama,
Qwen2, Mistral) becomes one rope node:

    x * cos + cat(-x[..., d/2:], x[..., :d/2], dim=-1) * sin      (mul and add operands in either order)

Seven nodes per query/key tensor (two slices, neg, cat, two muls, add), fourteen per layer, become one:
in a decode step every node is a call, and a 24-layer model ran 336 of them for its rotary embedding.
Every intermediate value must be read only inside the pattern.

Counts: rope_fused.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program
from ..ir.opdef import SpecError, get_op
from .base import PassOptions, register_pass
from .rewrite import single_user

_SLICE, _NEG, _CAT = "aten.slice.Tensor", "aten.neg.default", "aten.cat.default"


def _aten(node: Optional[Node], target: str) -> bool:
    return node is not None and node.op == "aten" and node.attrs.get("target") == target


def _plain(node: Optional[Node], op: str) -> bool:
    """A two-tensor `op` node with no scalar operand or post-op."""
    return (node is not None and node.op == op and len(node.inputs) == 2 and not node.attrs.get("post_ops")
            and node.attrs.get("lhs_scalar") is None and node.attrs.get("rhs_scalar") is None)


def _last_dim_slice(node: Optional[Node], d: int) -> Optional[tuple[int, int]]:
    """(start, end) of a slice along the last of 4 dims with step 1."""
    if not _aten(node, _SLICE):
        return None
    args = node.attrs["args"]
    if len(args) < 4 or args[0] != {"$in": 0} or args[1] not in (3, -1) or (len(args) > 4 and args[4] != 1):
        return None
    start, end = args[2], args[3]
    if not isinstance(start, int) or not isinstance(end, int):
        return None
    return start, min(end, d)


def _rotated_half(graph: Graph, cat: Node, producers, users) -> Optional[tuple[str, list[Node]]]:
    """(x, the nodes) when cat = cat(-x[..., d/2:], x[..., :d/2], dim=-1)."""
    if not _aten(cat, _CAT) or len(cat.inputs) != 2 or cat.attrs["args"] != [[{"$in": 0}, {"$in": 1}], -1] \
            and cat.attrs["args"] != [[{"$in": 0}, {"$in": 1}], 3]:
        return None
    neg, low = producers.get(cat.inputs[0]), producers.get(cat.inputs[1])
    if not _aten(neg, _NEG) or low is None:
        return None
    high = producers.get(neg.inputs[0])
    if high is None or high.inputs[0] != low.inputs[0]:
        return None
    x = high.inputs[0]
    spec = graph.values[x]
    d = spec.shape[3] if spec.rank == 4 else None
    if not isinstance(d, int) or d % 2:
        return None
    if _last_dim_slice(high, d) != (d // 2, d) or _last_dim_slice(low, d) != (0, d // 2):
        return None
    for node, reader in ((neg, cat), (high, neg), (low, cat)):
        if single_user(graph, node.outputs[0], users) is not reader:
            return None
    return x, [high, low, neg, cat]


def _match(graph: Graph, add: Node, producers, users) -> Optional[tuple[str, str, str, list[Node]]]:
    """(x, cos, sin, the nodes that go) for one add."""
    if not _plain(add, "add"):
        return None
    muls = [producers.get(v) for v in add.inputs]
    if not all(_plain(m, "mul") and single_user(graph, m.outputs[0], users) is add for m in muls):
        return None
    for rot_mul, cos_mul in (muls, muls[::-1]):
        for cat_slot in (0, 1):
            cat = producers.get(rot_mul.inputs[cat_slot])
            found = _rotated_half(graph, cat, producers, users) if cat is not None else None
            if found is None or single_user(graph, cat.outputs[0], users) is not rot_mul:
                continue
            x, nodes = found
            if x not in cos_mul.inputs or cos_mul.inputs.count(x) != 1:
                continue
            cos = cos_mul.inputs[1 - cos_mul.inputs.index(x)]
            sin = rot_mul.inputs[1 - cat_slot]
            return x, cos, sin, [*nodes, rot_mul, cos_mul]
    return None


@register_pass("fuse_rope", "rotate-half rotary embedding (x*cos + rotate_half(x)*sin) -> one rope node")
def fuse_rope(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    fused = 0
    for add in [n for n in graph.nodes if n.op == "add"]:
        producers, users = graph.producers(), graph.users()
        found = _match(graph, add, producers, users)
        if found is None:
            continue
        x, cos, sin, doomed = found
        try:  # cos/sin of another shape (a broadcast the kernels do not model) keep the pattern
            get_op("rope").infer([graph.values[v] for v in (x, cos, sin)], get_op("rope").parse_attrs({}))
        except SpecError:
            continue
        index = graph.nodes.index(add)
        graph.nodes[index] = Node(name=add.name, op="rope", inputs=[x, cos, sin], outputs=list(add.outputs),
                                  attrs={}, source=add.source)
        gone = {n.name for n in doomed}
        graph.nodes = [n for n in graph.nodes if n.name not in gone]
        fused += 1
    if fused:
        program.prune()
    return {"rope_fused": fused}
