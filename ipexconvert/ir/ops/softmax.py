"""softmax along one axis; accumulates in fp32."""
from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like, require


class SoftmaxAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dim: int


@register_op
class SoftmaxOp(OpDef):
    name = "softmax"
    Attrs = SoftmaxAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        rank = max(inputs[0].rank, 1)
        require(-rank <= attrs.dim < rank, f"softmax dim {attrs.dim} of {inputs[0].describe()}")
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x = inputs[0]
        return torch.softmax(x.float(), attrs.dim).to(x.dtype)
