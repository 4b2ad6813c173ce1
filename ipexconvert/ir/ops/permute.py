"""permute: reorder axes (transpose is a permute of two axes)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like, require


class PermuteAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    perm: list[int]


@register_op
class PermuteOp(OpDef):
    name = "permute"
    Attrs = PermuteAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        require(sorted(attrs.perm) == list(range(inputs[0].rank)),
                f"perm {attrs.perm} is not an order of the {inputs[0].rank} axes of {inputs[0].describe()}")
        return [like(inputs[0], [inputs[0].shape[p] for p in attrs.perm])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0].permute(attrs.perm)
