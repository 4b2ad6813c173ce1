"""matmul: batched matrix product (torch.matmul semantics) with fused post-ops."""
from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..dims import broadcast
from ..opdef import OpDef, register_op
from ..postops import PostOp, apply_post_ops
from ._common import like, promote


class MatmulAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    post_ops: list[PostOp] = Field(default_factory=list)


@register_op
class MatmulOp(OpDef):
    """inputs: a [..., m, k], b [..., k, n], then post-op operands."""

    name = "matmul"
    Attrs = MatmulAttrs
    aten_targets = ("aten.matmul.default", "aten.bmm.default", "aten.mm.default")

    @classmethod
    def from_aten(cls, target, args):
        return [args["self"], args.get("other", args.get("mat2"))], {}

    @classmethod
    def infer(cls, inputs, attrs):
        a, b = inputs[0], inputs[1]
        if a.rank < 2 or b.rank < 2:
            raise NotImplementedError("matmul shape rule covers rank >= 2")
        batch = broadcast(a.shape[:-2], b.shape[:-2])
        return [like(a, [*batch, a.shape[-2], b.shape[-1]], promote([a, b]))]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return apply_post_ops(torch.matmul(inputs[0], inputs[1]), attrs.post_ops, inputs)
