"""matmul: batched matrix product (torch.matmul semantics) with fused post-ops."""
from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..dims import broadcast
from ..opdef import Arity, OpDef, SpecError, register_op
from ..postops import PostOp, apply_post_ops
from ._common import like, require, same_dim


class MatmulAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    post_ops: list[PostOp] = Field(default_factory=list)


@register_op
class MatmulOp(OpDef):
    """inputs: a [..., m, k], b [..., k, n], then post-op operands."""

    name = "matmul"
    Attrs = MatmulAttrs
    arity = Arity(2, 2, post_op_operands=True)

    @classmethod
    def infer(cls, inputs, attrs):
        # torch.matmul: a 1-D operand is a row (a) or column (b) vector whose axis is dropped afterwards.
        a, b = inputs[0], inputs[1]
        require(a.rank >= 1 and b.rank >= 1, f"matmul of {a.describe()} and {b.describe()} (scalars)")
        require(a.dtype == b.dtype, f"matmul of {a.describe()} and {b.describe()} (torch needs one dtype)")
        k_b = b.shape[-2] if b.rank >= 2 else b.shape[0]
        require(same_dim(a.shape[-1], k_b), f"matmul of {a.describe()} and {b.describe()}: the inner sizes differ")
        try:
            batch = broadcast(a.shape[:-2], b.shape[:-2])
        except ValueError as e:
            raise SpecError(f"matmul batch dims: {e}") from None
        rows = [a.shape[-2]] if a.rank >= 2 else []
        cols = [b.shape[-1]] if b.rank >= 2 else []
        return [like(a, [*batch, *rows, *cols])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return apply_post_ops(torch.matmul(inputs[0], inputs[1]), attrs.post_ops, inputs)
