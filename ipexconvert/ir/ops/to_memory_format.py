"""to_memory_format: change the physical layout (channels-last for conv chains); values unchanged,
or, with `dtype`, converted to that float dtype on the way (fuse_layout_change folds a to_dtype in)."""
from __future__ import annotations

from typing import Literal, Optional

import torch
from pydantic import BaseModel, ConfigDict

from .. import dtypes
from ..opdef import OpDef, register_op
from ._common import expect_dtype, expect_rank, like

_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


class ToMemoryFormatAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    memory_format: Literal["contiguous", "channels_last"]
    dtype: Optional[Literal["float32", "bfloat16"]] = None


@register_op
class ToMemoryFormatOp(OpDef):
    name = "to_memory_format"
    Attrs = ToMemoryFormatAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        if attrs.memory_format == "channels_last":
            expect_rank(inputs[0], (4,), "the input of to_memory_format(channels_last)")
        if attrs.dtype is not None:
            expect_dtype(inputs[0], sorted(dtypes.FLOAT_DTYPES), "the input of a converting to_memory_format")
        return [like(inputs[0], dtype=attrs.dtype).with_(memory_format=attrs.memory_format)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x = inputs[0] if attrs.dtype is None else inputs[0].to(dtypes.to_torch(attrs.dtype))
        return x.contiguous(memory_format=_FORMATS[attrs.memory_format])
