"""reshape: view/reshape to a shape that may name dynamic dims."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ...errors import ArtifactError
from ..dims import DimEntry, floordiv, numel, resolve_shape
from ..opdef import OpDef, register_op
from ._common import like, require, same_dim


class ReshapeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    shape: list[DimEntry]  # may hold one -1


@register_op
class ReshapeOp(OpDef):
    name = "reshape"
    Attrs = ReshapeAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        shape, total = list(attrs.shape), numel(inputs[0].shape)
        require(shape.count(-1) <= 1 and all(not isinstance(d, int) or d >= -1 for d in shape),
                f"reshape to {shape} (sizes are >= 0, with at most one -1)")
        if -1 in shape:
            known = numel([d for d in shape if d != -1])
            require(known != 0, f"reshape of {inputs[0].describe()} to {shape}: -1 is ambiguous next to a 0")
            require(not (isinstance(known, int) and isinstance(total, int)) or total % known == 0,
                    f"reshape of {inputs[0].describe()} ({total} elements) to {shape}")
            shape[shape.index(-1)] = floordiv(total, known)
        else:
            require(same_dim(numel(shape), total), f"reshape of {inputs[0].describe()} to {shape} changes the element count")
        return [like(inputs[0], shape)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        shape = resolve_shape(attrs.shape, dims)
        try:
            return inputs[0].reshape(shape)
        except RuntimeError as e:  # a -1 next to a size that is 0 for these dims, a count that does not divide
            raise ArtifactError(f"reshape of {list(inputs[0].shape)} to {shape} (the node's {attrs.shape} at "
                                f"{dims}) fails: {' '.join(str(e).split())[:200]}",
                                "call the model with other sizes; the artifact's dim ranges allow sizes its graph "
                                "cannot run, so re-create it with `ipexconvert optimize` if it was edited") from None
