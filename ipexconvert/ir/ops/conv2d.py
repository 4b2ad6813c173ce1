"""conv2d: 2-D convolution with optional bias and fused post-ops."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field

from ..dims import mul
from ..opdef import Arity, OpDef, register_op
from ..postops import PostOp, apply_post_ops
from ..spec import TensorSpec
from ._common import (NonNegative2, Positive2, bias_as_input, expect_rank, expect_shape, require, same_dim,
                      window_output_size)


class Conv2dAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stride: Positive2 = [1, 1]
    padding: NonNegative2 = [0, 0]
    dilation: Positive2 = [1, 1]
    groups: int = Field(default=1, ge=1)
    post_ops: list[PostOp] = Field(default_factory=list)


def conv_output(x: TensorSpec, w: TensorSpec, bias: TensorSpec | None, attrs, dtype: str) -> TensorSpec:
    """The output spec of a 2-D convolution (conv2d, qconv2d); SpecError if x, weight and bias do not fit."""
    expect_rank(x, (4,), "the input")
    expect_rank(w, (4,), "the weight")
    out_channels, groups = w.shape[0], attrs.groups
    require(same_dim(x.shape[1], mul(w.shape[1], groups)) and (not isinstance(out_channels, int) or out_channels % groups == 0),
            f"the input {x.describe()} does not fit the weight {w.describe()} with groups {groups}")
    expect_shape(bias, [out_channels], "the bias")

    def out_size(i: int):
        k, s, p, d = w.shape[2 + i], attrs.stride[i], attrs.padding[i], attrs.dilation[i]
        require(isinstance(k, int), f"the weight {w.describe()} has a symbolic kernel size")
        size = window_output_size(x.shape[2 + i], k, s, p, d)
        require(not isinstance(size, int) or size >= 1,
                f"the kernel {w.shape[2:]} (dilation {attrs.dilation}) does not fit the input {x.describe()} "
                f"padded by {attrs.padding}")
        return size

    return TensorSpec(dtype=dtype, shape=[x.shape[0], out_channels, out_size(0), out_size(1)],
                      memory_format=x.memory_format)


@register_op
class Conv2dOp(OpDef):
    """inputs: x [N,C,H,W], weight [O,C/g,kh,kw], bias [O] or None, then post-op operands."""

    name = "conv2d"
    Attrs = Conv2dAttrs
    arity = Arity(3, 3, frozenset({2}), post_op_operands=True)

    @classmethod
    def infer(cls, inputs, attrs):
        x, w, bias = inputs[0], inputs[1], inputs[2]
        require(w.dtype == x.dtype and (bias is None or bias.dtype in (x.dtype, "float32")),
                f"the input {x.describe()}, weight {w.describe()} and bias "
                f"{'none' if bias is None else bias.describe()} differ in dtype")
        return [conv_output(x, w, bias, attrs, x.dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w, b = inputs[0], inputs[1], inputs[2]
        y = F.conv2d(x, w, bias_as_input(b, x), attrs.stride, attrs.padding, attrs.dilation, attrs.groups)
        return apply_post_ops(y, attrs.post_ops, inputs)
