"""conv2d: 2-D convolution with optional bias and fused post-ops."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field

from ..dims import add, floordiv
from ..opdef import OpDef, Unconvertible, register_op
from ..postops import PostOp, apply_post_ops
from ..spec import TensorSpec
from ._common import NonNegative2, Positive2


class Conv2dAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stride: Positive2 = [1, 1]
    padding: NonNegative2 = [0, 0]
    dilation: Positive2 = [1, 1]
    groups: int = Field(default=1, ge=1)
    post_ops: list[PostOp] = Field(default_factory=list)


def _pair(v) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


@register_op
class Conv2dOp(OpDef):
    """inputs: x [N,C,H,W], weight [O,C/g,kh,kw], bias [O] or None, then post-op operands."""

    name = "conv2d"
    Attrs = Conv2dAttrs
    aten_targets = ("aten.conv2d.default", "aten.convolution.default")

    @classmethod
    def from_aten(cls, target, args):
        if target == "aten.convolution.default" and (args["transposed"] or any(args["output_padding"])):
            raise Unconvertible("transposed convolution")
        if isinstance(args["padding"], str):
            raise Unconvertible("string padding")
        if len(_pair(args["stride"])) != 2:
            raise Unconvertible("not 2-D")
        attrs = {
            "stride": _pair(args["stride"]),
            "padding": _pair(args["padding"]),
            "dilation": _pair(args["dilation"]),
            "groups": int(args["groups"]),
        }
        return [args["input"], args["weight"], args.get("bias")], attrs

    @classmethod
    def infer(cls, inputs, attrs):
        x, w = inputs[0], inputs[1]
        n, _, h, wd = x.shape
        kh, kw = w.shape[2], w.shape[3]

        def out_size(size, k, s, p, d):
            return add(floordiv(add(size, 2 * p - d * (k - 1) - 1), s), 1)

        shape = [n, w.shape[0], out_size(h, kh, attrs.stride[0], attrs.padding[0], attrs.dilation[0]),
                 out_size(wd, kw, attrs.stride[1], attrs.padding[1], attrs.dilation[1])]
        return [TensorSpec(dtype=x.dtype, shape=shape, memory_format=x.memory_format)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w, b = inputs[0], inputs[1], inputs[2]
        y = F.conv2d(x, w, b, attrs.stride, attrs.padding, attrs.dilation, attrs.groups)
        return apply_post_ops(y, attrs.post_ops, inputs)
