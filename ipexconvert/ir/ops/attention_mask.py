"""attention_mask: a bool or float attention mask as the additive mask of the activations' dtype
(0 where attended, -inf where masked), what sdpa computes from it on every call. The
share_attention_mask pass computes it once for all the attention layers that read one mask."""
from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict

from .. import dtypes
from ..opdef import OpDef, register_op
from ._common import FloatDtypeName, expect_dtype, like


class AttentionMaskAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dtype: FloatDtypeName  # the attention's activations dtype


@register_op
class AttentionMaskOp(OpDef):
    name = "attention_mask"
    Attrs = AttentionMaskAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        expect_dtype(inputs[0], ("bool", *sorted(dtypes.FLOAT_DTYPES)), "the mask")
        return [like(inputs[0], dtype=attrs.dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        mask, dtype = inputs[0], dtypes.to_torch(attrs.dtype)
        if mask.dtype == torch.bool:
            return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask.logical_not(), float("-inf"))
        return mask.to(dtype)
