"""rms_norm over the trailing dims; accumulates in fp32."""
from __future__ import annotations

from typing import Optional

import torch
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like


class RmsNormAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    normalized_shape: list[int]
    eps: Optional[float] = None


@register_op
class RmsNormOp(OpDef):
    """inputs: x, weight or None."""

    name = "rms_norm"
    Attrs = RmsNormAttrs
    aten_targets = ("aten.rms_norm.default",)

    @classmethod
    def from_aten(cls, target, args):
        eps = args.get("eps")
        return [args["input"], args.get("weight")], {"normalized_shape": [int(s) for s in args["normalized_shape"]],
                                                      "eps": None if eps is None else float(eps)}

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w = inputs
        y = torch.rms_norm(x.float(), attrs.normalized_shape, None if w is None else w.float(), attrs.eps)
        return y.to(x.dtype)
