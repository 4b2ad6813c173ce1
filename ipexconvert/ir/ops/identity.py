"""identity: a no-op (clone, alias, eval-mode dropout). Removed by the identity-removal pass."""
from __future__ import annotations

from ..opdef import OpDef, register_op
from ._common import like


@register_op
class IdentityOp(OpDef):
    name = "identity"

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return inputs[0]
