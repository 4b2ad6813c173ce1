"""sdpa: scaled-dot-product attention softmax(q k^T * scale + mask) v."""
from __future__ import annotations

import math
from typing import Optional

import torch
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, Unconvertible, register_op
from ._common import like


class SdpaAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: Optional[float] = None  # None: 1/sqrt(head_dim)
    is_causal: bool = False
    enable_gqa: bool = False


@register_op
class SdpaOp(OpDef):
    """inputs: q [..., L, E], k [..., S, E], v [..., S, Ev], mask (bool or additive) or None."""

    name = "sdpa"
    Attrs = SdpaAttrs
    aten_targets = ("aten.scaled_dot_product_attention.default",)

    @classmethod
    def from_aten(cls, target, args):
        if args.get("dropout_p", 0.0):
            raise Unconvertible("attention dropout")
        scale = args.get("scale")
        attrs = {"scale": None if scale is None else float(scale), "is_causal": bool(args.get("is_causal", False)),
                 "enable_gqa": bool(args.get("enable_gqa", False))}
        return [args["query"], args["key"], args["value"], args.get("attn_mask")], attrs

    @classmethod
    def infer(cls, inputs, attrs):
        q, v = inputs[0], inputs[2]
        return [like(q, [*q.shape[:-1], v.shape[-1]])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        q, k, v, mask = inputs
        if mask is not None and mask.dtype != torch.bool and mask.dtype != q.dtype:
            mask = mask.to(q.dtype)  # an fp32 additive mask next to bf16 activations
        scale = attrs.scale if attrs.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=attrs.is_causal, scale=scale, enable_gqa=attrs.enable_gqa)
