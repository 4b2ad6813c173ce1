"""sdpa -> MatMul / Softmax / MatMul, with the guard that gives 0 for fully masked rows (as sdpa
promises) on the output; attention_mask -> Where(mask, 0, -inf)."""
from __future__ import annotations

import math

import numpy as np
import onnx

from ..builder import Unexportable
from ._registry import emits


def _additive(b, mask: str) -> str:
    if b.graph.values[mask].dtype != "bool":
        return mask
    return b.node("Where", [mask, b.const(np.array(0.0, dtype=np.float32), "zero"),
                            b.const(np.array(-np.inf, dtype=np.float32), "neg_inf")])[0]


def _fully_masked(b, mask: str) -> str:
    """[..., L, 1] bool: the query rows whose every key the mask removes (False, or -inf when additive).
    Read off the mask, which is small ([batch, 1, 1, S] for padding), and applied to the attention's
    output [..., L, E]: a guard on the probabilities [..., L, S] cost ONNX Runtime a fifth of MiniLM's time."""
    if b.graph.values[mask].dtype == "bool":
        kept = b.node("ReduceMax", [b.node("Cast", [mask], to=onnx.TensorProto.FLOAT)[0]], axes=[-1], keepdims=1)[0]
        return b.node("Not", [b.node("Cast", [kept], to=onnx.TensorProto.BOOL)[0]])[0]
    removed = b.node("Cast", [b.node("IsInf", [mask], detect_negative=1, detect_positive=0)[0]], to=onnx.TensorProto.FLOAT)[0]
    every = b.node("ReduceMin", [removed], axes=[-1], keepdims=1)[0]
    return b.node("Cast", [every], to=onnx.TensorProto.BOOL)[0]


@emits("sdpa")
def sdpa(b, node) -> None:
    a = node.attrs
    if a.get("is_causal") or a.get("enable_gqa"):
        raise Unexportable("causal or grouped-query attention")
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 else None
    rank = b.graph.values[k].rank
    scale = a.get("scale") or 1.0 / math.sqrt(b.graph.values[q].shape[-1])
    kt = b.node("Transpose", [k], perm=[*range(rank - 2), rank - 1, rank - 2])[0]
    scores = b.node("Mul", [b.node("MatMul", [q, kt])[0], b.const(np.array(scale, dtype=np.float32), "scale")])[0]
    if mask is not None:
        scores = b.node("Add", [scores, _additive(b, mask)])[0]
    p = b.node("Softmax", [scores], axis=-1)[0]
    y = b.node("MatMul", [p, v])[0]
    if mask is not None:  # a fully masked row's softmax is NaN, and so is its output row: 0 instead
        y = b.node("Where", [_fully_masked(b, mask), b.const(np.array(0.0, dtype=np.float32), "zero"), y])[0]
    if a.get("quantize") is None:
        b.node("Identity", [y], node.outputs)
        return
    # codes of the [batch, q_len, heads * head_dim] rows the next layer reads, kept as [b, h, L, E]
    from .quant import quantize_rows
    rows = b.node("Transpose", [y], perm=[0, 2, 1, 3])[0]
    multiplier = node.inputs[4] if len(node.inputs) > 4 else None
    if multiplier is not None:
        heads, width = b.graph.values[q].shape[1], b.graph.values[v].shape[-1]
        multiplier = b.const(b.weight(multiplier).reshape(heads, width), "multiplier")
    codes = quantize_rows(b, rows, a["quantize"], multiplier)
    b.node("Transpose", [codes], node.outputs, perm=[0, 2, 1, 3])


@emits("attention_mask")
def attention_mask(b, node) -> None:
    b.node("Identity", [_additive(b, node.inputs[0])], node.outputs)  # float32 (bfloat16 is written as float32)
