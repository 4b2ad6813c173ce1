"""identity: a no-op (clone, alias, eval-mode dropout). Removed by the identity-removal pass."""
from __future__ import annotations

from ..opdef import OpDef, Unconvertible, register_op
from ._common import like


@register_op
class IdentityOp(OpDef):
    name = "identity"
    aten_targets = ("aten.clone.default", "aten.alias.default", "aten.dropout.default",
                    "aten.contiguous.default", "aten.detach.default", "aten.lift_fresh_copy.default")

    @classmethod
    def from_aten(cls, target, args):
        if target == "aten.dropout.default" and args.get("train"):
            raise Unconvertible("training-mode dropout")
        return [args.get("self", args.get("input"))], {}

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0]
