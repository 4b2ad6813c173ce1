"""add_layer_norm: layer_norm(x + residual), optionally also returning the sum (pre-norm blocks)
and the norm quantized for the int8 layer that reads it (fold_norm_quantize)."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict

from ..dims import broadcast
from ..opdef import Arity, OpDef, SpecError, register_op
from ._common import expect_shape, like, promote, trailing
from ._quant import quantize
from .layer_norm import layer_norm_fp32
from .quantize import QuantizeAttrs


class AddLayerNormAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    normalized_shape: list[int]
    eps: float = 1e-5
    return_sum: bool = False
    quantize: Optional[QuantizeAttrs] = None  # also return quantize(norm), per tensor


@register_op
class AddLayerNormOp(OpDef):
    """inputs: x, residual, weight or None, bias or None[, quantize multiplier (float32 [C], as the
    quantize op's)]. outputs: norm[, sum][, quantized norm]."""

    name = "add_layer_norm"
    Attrs = AddLayerNormAttrs

    @classmethod
    def input_arity(cls, attrs):
        return Arity(4, 5 if attrs.quantize is not None else 4, frozenset({2, 3, 4}))

    @classmethod
    def infer(cls, inputs, attrs):
        x, r = inputs[0], inputs[1]
        try:
            out = like(x, broadcast(x.shape, r.shape), promote([x, r]))
        except ValueError as e:
            raise SpecError(f"x and residual: {e}") from None
        trailing(out, attrs.normalized_shape, "the sum")
        expect_shape(inputs[2], attrs.normalized_shape, "the weight")
        expect_shape(inputs[3], attrs.normalized_shape, "the bias")
        if len(inputs) > 4:
            expect_shape(inputs[4], [out.shape[-1]], "the quantize multiplier")
        outs = [out, out] if attrs.return_sum else [out]
        if attrs.quantize is not None:
            outs.append(like(out, dtype=attrs.quantize.dtype))
        return outs

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, r, w, b = inputs[:4]
        total = x + r
        y = layer_norm_fp32(total, attrs.normalized_shape, w, b, attrs.eps)
        outs = [y, total] if attrs.return_sum else [y]
        if attrs.quantize is not None:
            q = attrs.quantize
            outs.append(quantize(y, q.scale, q.zero_point, q.dtype, inputs[4] if len(inputs) > 4 else None))
        return tuple(outs) if len(outs) > 1 else y
