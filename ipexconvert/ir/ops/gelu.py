"""gelu: exact (erf) or tanh-approximated GELU."""
from typing import Literal

import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like


class GeluAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approximate: Literal["none", "tanh"] = "none"


@register_op
class GeluOp(OpDef):
    name = "gelu"
    Attrs = GeluAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return F.gelu(inputs[0], approximate=attrs.approximate)
