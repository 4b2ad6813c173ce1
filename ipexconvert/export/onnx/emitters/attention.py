"""sdpa -> MatMul / Softmax / MatMul, with the guard that gives 0 for fully masked rows (as sdpa
promises); attention_mask -> Where(mask, 0, -inf)."""
from __future__ import annotations

import math

import numpy as np

from ..builder import Unexportable
from ._registry import emits


def _additive(b, mask: str) -> str:
    if b.graph.values[mask].dtype != "bool":
        return mask
    return b.node("Where", [mask, b.const(np.array(0.0, dtype=np.float32), "zero"),
                            b.const(np.array(-np.inf, dtype=np.float32), "neg_inf")])[0]


@emits("sdpa")
def sdpa(b, node) -> None:
    a = node.attrs
    if a.get("is_causal") or a.get("enable_gqa") or a.get("quantize") is not None:
        raise Unexportable("causal, grouped-query or quantized attention")
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 else None
    rank = b.graph.values[k].rank
    scale = a.get("scale") or 1.0 / math.sqrt(b.graph.values[q].shape[-1])
    kt = b.node("Transpose", [k], perm=[*range(rank - 2), rank - 1, rank - 2])[0]
    scores = b.node("Mul", [b.node("MatMul", [q, kt])[0], b.const(np.array(scale, dtype=np.float32), "scale")])[0]
    if mask is not None:
        scores = b.node("Add", [scores, _additive(b, mask)])[0]
    p = b.node("Softmax", [scores], axis=-1)[0]
    p = b.node("Where", [b.node("IsNaN", [p])[0], b.const(np.array(0.0, dtype=np.float32), "zero"), p])[0]
    b.node("MatMul", [p, v], node.outputs)


@emits("attention_mask")
def attention_mask(b, node) -> None:
    if node.attrs["dtype"] != "float32":
        raise Unexportable(f"an attention mask of {node.attrs['dtype']}")
    b.node("Identity", [_additive(b, node.inputs[0])], node.outputs)
