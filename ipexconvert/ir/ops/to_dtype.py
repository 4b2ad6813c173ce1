"""to_dtype: element type conversion (the bf16 pass inserts these at the graph edges)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .. import dtypes
from ..opdef import OpDef, register_op
from ._common import DtypeName, like


class ToDtypeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dtype: DtypeName


@register_op
class ToDtypeOp(OpDef):
    name = "to_dtype"
    Attrs = ToDtypeAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0], dtype=attrs.dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0].to(dtypes.to_torch(attrs.dtype))
