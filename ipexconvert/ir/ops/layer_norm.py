"""layer_norm over the trailing dims; accumulates in fp32 whatever the activation dtype."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from ..opdef import Arity, OpDef, register_op
from ._common import expect_shape, like, trailing


class LayerNormAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    normalized_shape: list[int]
    eps: float = 1e-5


def layer_norm_fp32(x: torch.Tensor, shape, w, b, eps: float) -> torch.Tensor:
    y = F.layer_norm(x.float(), shape, None if w is None else w.float(), None if b is None else b.float(), eps)
    return y.to(x.dtype)


@register_op
class LayerNormOp(OpDef):
    """inputs: x, weight or None, bias or None."""

    name = "layer_norm"
    Attrs = LayerNormAttrs
    arity = Arity(3, 3, frozenset({1, 2}))

    @classmethod
    def infer(cls, inputs, attrs):
        trailing(inputs[0], attrs.normalized_shape)
        expect_shape(inputs[1], attrs.normalized_shape, "the weight")
        expect_shape(inputs[2], attrs.normalized_shape, "the bias")
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w, b = inputs
        return layer_norm_fp32(x, attrs.normalized_shape, w, b, attrs.eps)
