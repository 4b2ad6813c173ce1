"""sdpa: scaled-dot-product attention softmax(q k^T * scale + mask) v, optionally returned
quantized for the int8 layer after it (fold_attention_quantize).

A query row whose every key the mask removes (all -inf, or all False) gives 0, not the NaN a
plain softmax would: what torch's own attention does since 2.5 and what ONNX exporters write
around theirs (`where(isnan(p), 0, p)`). The reference applies it explicitly, so it holds
whatever torch version runs it, and so do the native kernels.

k and v may be stored narrower than q (a decoder's bfloat16 KV cache beside float32 activations, ir/ops/kv_append.py):
they are widened to q's dtype, exactly, before anything is computed. An int8 cache's rows (ir/ops/_kv_int8.py: head_dim
codes and a float32 scale, so its last dim is head_dim + 4) are read as code * scale in float32, then q's dtype."""
from __future__ import annotations

import math
from typing import Optional

import torch
from pydantic import BaseModel, ConfigDict

from .. import dtypes
from ..dims import mul
from ..opdef import Arity, OpDef, register_op
from ._common import broadcast_base, broadcast_to, expect_dtype, expect_rank, expect_shape, like, require, same_dim, same_shape
from ._kv_int8 import from_cache, head_dim_of
from .kv_append import NARROWER_CACHES
from ._quant import quantize
from .quantize import QuantizeAttrs


class SdpaAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: Optional[float] = None  # None: 1/sqrt(head_dim)
    is_causal: bool = False
    enable_gqa: bool = False
    # The output as the quantize op makes codes of it viewed as [batch, q_len, heads * head_dim]
    # (4-D q/k/v only); the multiplier, if any, is the fifth input.
    quantize: Optional[QuantizeAttrs] = None


def fully_masked_rows(mask: torch.Tensor) -> torch.Tensor:
    """[..., L, 1]: True where the mask removes every key of that query row."""
    base = broadcast_base(mask)  # an expanded mask is checked once per distinct row
    removed = ~base if base.dtype == torch.bool else base == float("-inf")
    return removed.all(dim=-1, keepdim=True).expand(*mask.shape[:-1], 1)


def zero_masked_rows(y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """y with the rows the mask removes entirely set to 0 (y [..., L, Ev], mask broadcastable to [..., L, S])."""
    fully = fully_masked_rows(mask)
    return y.masked_fill(fully, 0) if bool(fully.any()) else y


@register_op
class SdpaOp(OpDef):
    """inputs: q [..., L, E], k [..., S, E], v [..., S, Ev], mask (bool or additive) or None[, quantize
    multiplier (float32 [heads * Ev], as the quantize op's)]."""

    name = "sdpa"
    Attrs = SdpaAttrs

    @classmethod
    def input_arity(cls, attrs):
        return Arity(4, 5 if attrs.quantize is not None else 4, frozenset({3, 4}))

    @classmethod
    def infer(cls, inputs, attrs):
        q, k, v, mask = inputs[:4]
        require(q.rank >= 2, f"the query {q.describe()} has fewer than 2 dims")
        for spec, what in ((q, "query"), (k, "key"), (v, "value")):
            expect_rank(spec, (q.rank,), f"the {what}")
            expect_dtype(spec, sorted(dtypes.FLOAT_DTYPES | ({"int8"} if spec is not q else set())), f"the {what}")
        require(k.dtype == v.dtype and (k.dtype == q.dtype or (q.dtype, k.dtype) in NARROWER_CACHES),
                f"q, k, v are {q.dtype}, {k.dtype}, {v.dtype} (one dtype, or k and v a cache narrower than q)")
        v_dim = head_dim_of(v.dtype, v.shape[-1])  # (an int8 cache's rows hold a scale beside the values)
        require(same_dim(q.shape[-1], head_dim_of(k.dtype, k.shape[-1])) and same_dim(k.shape[-2], v.shape[-2]),
                f"q {q.describe()}, k {k.describe()} and v {v.describe()} do not fit ([..., L, E], [..., S, E], [..., S, Ev])")
        require(same_shape(k.shape[:-2], v.shape[:-2]), f"k {k.describe()} and v {v.describe()} differ in batch dims")
        if attrs.enable_gqa and q.rank == 4:  # q heads are a multiple of k/v heads
            hq, hk = q.shape[1], k.shape[1]
            require(same_dim(q.shape[0], k.shape[0]) and (not (isinstance(hq, int) and isinstance(hk, int)) or hk > 0 and hq % hk == 0),
                    f"q {q.describe()} and k {k.describe()} do not fit grouped-query attention")
        else:
            require(same_shape(q.shape[:-2], k.shape[:-2]), f"q {q.describe()} and k {k.describe()} differ in batch dims")
        if mask is not None:
            expect_dtype(mask, ("bool", *sorted(dtypes.FLOAT_DTYPES)), "the mask")
            broadcast_to([*q.shape[:-1], k.shape[-2]], mask, "the mask")
        if attrs.quantize is not None:
            expect_rank(q, (4,), "the query of a quantized sdpa")
            if len(inputs) > 4:
                expect_shape(inputs[4], [mul(q.shape[1], v_dim)], "the quantize multiplier")
        out = like(q, [*q.shape[:-1], v_dim])
        return [out if attrs.quantize is None else like(out, dtype=attrs.quantize.dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        y = attention(inputs, attrs)
        if inputs[3] is not None:
            y = zero_masked_rows(y, inputs[3])
        return quantize_output(y, inputs, attrs)


def attention(inputs, attrs: SdpaAttrs) -> torch.Tensor:
    """torch's attention on q, k, v and the mask (an additive mask in the activations' dtype), nothing more."""
    q, k, v, mask = inputs[:4]
    k, v = from_cache(k, q.dtype), from_cache(v, q.dtype)  # a narrower cache widened; a no-op otherwise
    if mask is not None and mask.dtype != torch.bool and mask.dtype != q.dtype:
        mask = mask.to(q.dtype)  # an fp32 additive mask next to bf16 activations
    scale = attrs.scale if attrs.scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=attrs.is_causal, scale=scale, enable_gqa=attrs.enable_gqa)


def quantize_output(y: torch.Tensor, inputs, attrs: SdpaAttrs) -> torch.Tensor:
    """y itself, or its codes when the node quantizes for the int8 layer after it."""
    if attrs.quantize is None:
        return y
    qa, rows = attrs.quantize, y.transpose(1, 2)  # [batch, q_len, heads, head_dim]
    multiplier = inputs[4].reshape(rows.shape[-2:]) if len(inputs) > 4 and inputs[4] is not None else None
    return quantize(rows, qa.scale, qa.zero_point, qa.dtype, multiplier).transpose(1, 2)
