"""permute: reorder axes (transpose is a permute of two axes)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like, norm_axis, require


class PermuteAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    perm: list[int]


@register_op
class PermuteOp(OpDef):
    name = "permute"
    Attrs = PermuteAttrs
    aten_targets = ("aten.permute.default", "aten.transpose.int", "aten.t.default")

    @classmethod
    def from_aten(cls, target, args):
        x = args["self"]
        rank = len(x.meta["val"].shape)
        if target == "aten.permute.default":
            perm = [norm_axis(int(d), rank) for d in args["dims"]]
        else:
            d0, d1 = (0, 1) if target == "aten.t.default" else (norm_axis(int(args["dim0"]), rank), norm_axis(int(args["dim1"]), rank))
            perm = list(range(rank))
            perm[d0], perm[d1] = perm[d1], perm[d0]
        return [x], {"perm": perm}

    @classmethod
    def infer(cls, inputs, attrs):
        require(sorted(attrs.perm) == list(range(inputs[0].rank)),
                f"perm {attrs.perm} is not an order of the {inputs[0].rank} axes of {inputs[0].describe()}")
        return [like(inputs[0], [inputs[0].shape[p] for p in attrs.perm])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0].permute(attrs.perm)
