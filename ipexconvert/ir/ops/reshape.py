"""reshape: view/reshape to a shape that may name dynamic dims."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..dims import DimEntry, floordiv, numel, resolve_shape
from ..opdef import OpDef, register_op
from ._common import like


class ReshapeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    shape: list[DimEntry]  # may hold one -1


@register_op
class ReshapeOp(OpDef):
    name = "reshape"
    Attrs = ReshapeAttrs
    aten_targets = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default")

    @classmethod
    def from_aten(cls, target, args):
        size = args["shape"] if target == "aten.reshape.default" else args["size"]  # the schemas name it differently
        return [args["self"]], {"shape": list(size)}

    @classmethod
    def infer(cls, inputs, attrs):
        shape = list(attrs.shape)
        if -1 in shape:
            known = numel([d for d in shape if d != -1])
            shape[shape.index(-1)] = floordiv(numel(inputs[0].shape), known)
        return [like(inputs[0], shape)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0].reshape(resolve_shape(attrs.shape, dims))
