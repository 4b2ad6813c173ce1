"""simplify_padding_mask: a padding mask that an export builds by indexing and and-ing becomes a view of the mask.

transformers' sdpa_mask builds a bidirectional encoder's [batch, 1, seq, seq] bool mask on every call as
`(full & (q_idx >= 0)) & mask[batch_idx, kv_idx]`, where the indices are aranges broadcast over separate axes:
three copies of a [batch, 1, seq, seq] tensor (an advanced index, two ands), then attention_mask compares every
query row of it before keeping one. Here, with no change to any value:

- index(m, [arange(B) along axis p, arange(S) along axis q]) for a 2-D m of sizes [B, S] and p < q picks
  m[i, j] at (.., i, .., j, ..): m reshaped to the output's shape (a view);
- bitwise_and(t, y) where t is all true (a bool constant that is, arange(0, n) >= 0, unsqueezes and ands of
  those) is y broadcast to the output's shape: an expand (a view);

so the mask stays [batch, 1, 1, seq] underneath and attention_mask widens one row per batch. Measured in
benchmarks/results/session67-simplify-padding-mask.md.

Counts: mask_indexes_viewed, true_ands_dropped.
"""
from __future__ import annotations

import re
from typing import Optional

import torch

from ..ir import Node, Program
from ..ir.dims import same
from .base import PassOptions, register_pass

_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*$")


def _target(node: Node) -> Optional[str]:
    return node.attrs.get("target") if node.op == "aten" else None


def _arange_axis(value: str, program: Program, producers: dict) -> Optional[int]:
    """The one axis an arange(0, n) (step 1) lies along after unsqueezes, where `value` is such; else None."""
    spec, v = program.graph.values.get(value), value
    node = producers.get(v)
    while node is not None and _target(node) == "aten.unsqueeze.default" and len(node.inputs) == 1:
        v = node.inputs[0]
        node = producers.get(v)
    if node is None or node.inputs:
        return None
    args = node.attrs.get("args", [])
    if not (_target(node) == "aten.arange.start_step" and len(args) == 2 and args[0] == 0):
        return None
    long_axes = [i for i, d in enumerate(spec.shape) if d != 1]
    return long_axes[0] if len(long_axes) == 1 else None


def _all_true(value: str, program: Program, producers: dict, memo: dict) -> bool:
    """Whether every element of this bool value is True whatever the inputs and dims."""
    if value in memo:
        return memo[value]
    memo[value] = False  # (a cycle cannot happen in a graph; this only ends recursion early)
    weight = program.weights.get(value)
    node = producers.get(value)
    if weight is not None:
        result = weight.dtype == torch.bool and bool(weight.all())
    elif node is None:
        result = False
    elif _target(node) == "aten.ge.Scalar" and node.attrs.get("args", [None, None])[1] == 0:
        result = _arange_axis(node.inputs[0], program, producers) is not None  # arange(0, n) >= 0
    elif _target(node) in ("aten.unsqueeze.default", "aten.expand.default"):
        result = _all_true(node.inputs[0], program, producers, memo)
    elif _target(node) == "aten.bitwise_and.Tensor" and len(node.inputs) == 2:
        result = all(_all_true(v, program, producers, memo) for v in node.inputs)
    else:
        result = False
    memo[value] = result and program.graph.values[value].dtype == "bool"
    return memo[value]


def _view_of_index(node: Node, program: Program, producers: dict) -> Optional[Node]:
    """index(m, [arange along p, arange along q]), m [B, S], p < q, as reshape(m); else None."""
    args = node.attrs.get("args", [])
    if (_target(node) != "aten.index.Tensor" or len(node.inputs) != 3 or len(args) != 2
            or args[1] != [{"$in": 1}, {"$in": 2}] or args[0] != {"$in": 0}):
        return None
    values = program.graph.values
    m, rows, cols = node.inputs
    out = values[node.outputs[0]].shape
    p, q = (_arange_axis(v, program, producers) for v in (rows, cols))
    if p is None or q is None or p >= q or values[m].rank != 2:
        return None
    size_b, size_s = values[m].shape
    wanted = [size_b if i == p else size_s if i == q else 1 for i in range(len(out))]
    if not (same(values[rows].shape[p], size_b) and same(values[cols].shape[q], size_s)
            and len(out) == len(wanted) and all(same(a, b) for a, b in zip(out, wanted))):
        return None
    return Node(name=node.name, op="reshape", inputs=[m], outputs=list(node.outputs), attrs={"shape": list(out)},
                source=node.source)


def _expand_of_and(node: Node, program: Program, producers: dict, memo: dict) -> Optional[Node]:
    """bitwise_and(all true, y) (either order) as y expanded to the output's shape; else None."""
    if _target(node) != "aten.bitwise_and.Tensor" or len(node.inputs) != 2:
        return None
    values = program.graph.values
    kept = [v for v in node.inputs if not _all_true(v, program, producers, memo)]
    if len(kept) != 1 or values[kept[0]].dtype != "bool":
        return None  # both all true (constant folding's), or neither
    out = values[node.outputs[0]].shape
    if not all(isinstance(d, int) or _NAME.match(d) for d in out):
        return None  # an expression of dims: aten's size arguments name one dim or give a number
    sizes = [d if isinstance(d, int) else {"$sym": d} for d in out]
    return Node(name=node.name, op="aten", inputs=[kept[0]], outputs=list(node.outputs),
                attrs={"target": "aten.expand.default", "args": [{"$in": 0}, sizes], "kwargs": {}}, source=node.source)


@register_pass("simplify_padding_mask", "a padding mask built by indexing with aranges and and-ing with all-true "
                                        "masks as views of the mask")
def simplify_padding_mask(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers = graph.producers()
    memo: dict[str, bool] = {}
    viewed = dropped = 0
    for i, node in enumerate(graph.nodes):
        view = _view_of_index(node, program, producers)
        if view is not None:
            graph.nodes[i] = view
            viewed += 1
            continue
        expand = _expand_of_and(node, program, producers, memo)
        if expand is not None:
            graph.nodes[i] = expand
            dropped += 1
    if viewed or dropped:
        program.prune()
    return {"mask_indexes_viewed": viewed, "true_ands_dropped": dropped}
