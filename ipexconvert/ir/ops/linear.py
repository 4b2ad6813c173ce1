"""linear: y = x @ W^T + b with fused post-ops. Weight is [out, in]."""
from __future__ import annotations

import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field

from ..opdef import OpDef, register_op
from ..postops import PostOp, apply_post_ops
from ._common import like


class LinearAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    post_ops: list[PostOp] = Field(default_factory=list)


@register_op
class LinearOp(OpDef):
    """inputs: x [..., in], weight [out, in], bias [out] or None, then post-op operands."""

    name = "linear"
    Attrs = LinearAttrs
    aten_targets = ("aten.linear.default",)

    @classmethod
    def from_aten(cls, target, args):
        return [args["input"], args["weight"], args.get("bias")], {}

    @classmethod
    def infer(cls, inputs, attrs):
        x, w = inputs[0], inputs[1]
        return [like(x, [*x.shape[:-1], w.shape[0]])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        y = F.linear(inputs[0], inputs[1], inputs[2])
        return apply_post_ops(y, attrs.post_ops, inputs)
