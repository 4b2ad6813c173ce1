"""flatten: merge axes start..end into one."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..dims import numel
from ..opdef import OpDef, register_op
from ._common import like, norm_axis, require


class FlattenAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start_dim: int = 0
    end_dim: int = -1


@register_op
class FlattenOp(OpDef):
    name = "flatten"
    Attrs = FlattenAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        shape = inputs[0].shape
        if not shape:  # torch flattens a scalar to one element
            require(attrs.start_dim in (0, -1) and attrs.end_dim in (0, -1), f"flatten dims {attrs.start_dim}..{attrs.end_dim} of a scalar")
            return [like(inputs[0], [1])]
        s, e = norm_axis(attrs.start_dim, len(shape)), norm_axis(attrs.end_dim, len(shape))
        require(0 <= s <= e < len(shape), f"flatten dims {attrs.start_dim}..{attrs.end_dim} of {inputs[0].describe()}")
        return [like(inputs[0], [*shape[:s], numel(shape[s:e + 1]), *shape[e + 1:]])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0].flatten(attrs.start_dim, attrs.end_dim)
