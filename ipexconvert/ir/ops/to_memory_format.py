"""to_memory_format: change the physical layout (channels-last for conv chains); values unchanged."""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like

_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


class ToMemoryFormatAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    memory_format: Literal["contiguous", "channels_last"]


@register_op
class ToMemoryFormatOp(OpDef):
    name = "to_memory_format"
    Attrs = ToMemoryFormatAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0]).with_(memory_format=attrs.memory_format)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0].contiguous(memory_format=_FORMATS[attrs.memory_format])
