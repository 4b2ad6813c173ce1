"""add_layer_norm: layer_norm(x + residual), optionally also returning the sum (pre-norm blocks)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..dims import broadcast
from ..opdef import OpDef, register_op
from ._common import like, promote
from .layer_norm import layer_norm_fp32


class AddLayerNormAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    normalized_shape: list[int]
    eps: float = 1e-5
    return_sum: bool = False


@register_op
class AddLayerNormOp(OpDef):
    """inputs: x, residual, weight or None, bias or None. outputs: norm[, sum]."""

    name = "add_layer_norm"
    Attrs = AddLayerNormAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        x, r = inputs[0], inputs[1]
        out = like(x, broadcast(x.shape, r.shape), promote([x, r]))
        return [out, out] if attrs.return_sum else [out]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, r, w, b = inputs
        total = x + r
        y = layer_norm_fp32(total, attrs.normalized_shape, w, b, attrs.eps)
        return (y, total) if attrs.return_sum else y
