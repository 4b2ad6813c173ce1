"""attention_mask: a bool or float attention mask as the additive mask of the activations' dtype
(0 where attended, -inf where masked), what sdpa computes from it on every call. The
share_attention_mask pass computes it once for all the attention layers that read one mask."""
from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict

from .. import dtypes
from ..opdef import OpDef, register_op
from ._common import FloatDtypeName, broadcast_base, expect_dtype, like


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
        # On the mask's broadcast base, expanded back: a [b, 1, 1, S] mask expanded over L query rows
        # stays one row per batch, and so does a padding mask built out to every query row (transformers'
        # masks are `padding & (q_idx >= 0)`, a full [b, 1, L, S]): the attention kernels then widen one
        # row per head, and the fully-masked-rows check reads one row. One compare per call, shared by
        # every layer (share_attention_mask), against L-fold work in each. On the CPU only: on a GPU the
        # compare's answer would be a device sync, which a captured graph cannot hold.
        mask, dtype = inputs[0], dtypes.to_torch(attrs.dtype)
        base = broadcast_base(mask)
        if (base.device.type == "cpu" and base.dim() >= 2 and base.shape[-2] > 1
                and bool((base == base[..., :1, :]).all())):
            base = base[..., :1, :]
        if base.dtype == torch.bool:
            out = torch.zeros(base.shape, dtype=dtype, device=base.device).masked_fill_(base.logical_not(), float("-inf"))
        else:
            out = base.to(dtype)
        return out.expand(mask.shape)
