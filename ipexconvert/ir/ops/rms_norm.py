"""rms_norm over the trailing dims; accumulates in fp32."""
from __future__ import annotations

from typing import Optional

import torch
from pydantic import BaseModel, ConfigDict

from ..opdef import Arity, OpDef, register_op
from ._common import expect_shape, like, trailing


def effective_eps(eps: Optional[float]) -> float:
    """The eps a kernel adds: torch's rule for None, the machine epsilon of the float32 it computes in."""
    return float(torch.finfo(torch.float32).eps) if eps is None else float(eps)


class RmsNormAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    normalized_shape: list[int]
    eps: Optional[float] = None


@register_op
class RmsNormOp(OpDef):
    """inputs: x, weight or None."""

    name = "rms_norm"
    Attrs = RmsNormAttrs
    arity = Arity(2, 2, frozenset({1}))

    @classmethod
    def infer(cls, inputs, attrs):
        trailing(inputs[0], attrs.normalized_shape)
        expect_shape(inputs[1], attrs.normalized_shape, "the weight")
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w = inputs
        y = torch.rms_norm(x.float(), attrs.normalized_shape, None if w is None else w.float(), attrs.eps)
        return y.to(x.dtype)
