"""linear: y = x @ W^T + b with fused post-ops. Weight is [out, in]."""
from __future__ import annotations

import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field

from ..opdef import Arity, OpDef, register_op
from ..postops import PostOp, apply_post_ops
from ..spec import TensorSpec
from ._common import bias_as_input, expect_rank, expect_shape, like, require, same_dim


def linear_output(x: TensorSpec, w: TensorSpec, bias: TensorSpec | None, dtype: str) -> TensorSpec:
    """x [..., in] times weight [out, in] (plus bias [out]): [..., out]; SpecError if they do not fit."""
    expect_rank(w, (2,), "the weight")
    require(x.rank >= 1 and same_dim(x.shape[-1], w.shape[1]),
            f"the input {x.describe()} does not have the weight's {w.shape[1]} input features ({w.describe()})")
    expect_shape(bias, [w.shape[0]], "the bias")
    return like(x, [*x.shape[:-1], w.shape[0]], dtype=dtype)


class LinearAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    post_ops: list[PostOp] = Field(default_factory=list)


@register_op
class LinearOp(OpDef):
    """inputs: x [..., in], weight [out, in], bias [out] or None, then post-op operands."""

    name = "linear"
    Attrs = LinearAttrs
    arity = Arity(3, 3, frozenset({2}), post_op_operands=True)

    @classmethod
    def infer(cls, inputs, attrs):
        x, w, bias = inputs[0], inputs[1], inputs[2]
        require(w.dtype == x.dtype and (bias is None or bias.dtype in (x.dtype, "float32")),
                f"the input {x.describe()}, weight {w.describe()} and bias "
                f"{'none' if bias is None else bias.describe()} differ in dtype")
        return [linear_output(x, w, bias, x.dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        y = F.linear(inputs[0], inputs[1], bias_as_input(inputs[2], inputs[0]))
        return apply_post_ops(y, attrs.post_ops, inputs)
