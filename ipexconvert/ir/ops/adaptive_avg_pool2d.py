"""adaptive_avg_pool2d: average-pool to a fixed output size (global pooling when 1x1)."""
from __future__ import annotations

import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import Positive2, expect_rank, like


class AdaptiveAvgPool2dAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    output_size: Positive2


@register_op
class AdaptiveAvgPool2dOp(OpDef):
    name = "adaptive_avg_pool2d"
    Attrs = AdaptiveAvgPool2dAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        x = inputs[0]
        expect_rank(x, (3, 4), "the input")
        return [like(x, [*x.shape[:-2], *attrs.output_size]).with_(memory_format=x.memory_format)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return F.adaptive_avg_pool2d(inputs[0], attrs.output_size)
