"""batch_norm: inference-mode batch normalisation (running statistics)."""
from __future__ import annotations

import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from ..opdef import Arity, OpDef, register_op
from ._common import expect_shape, like, require


class BatchNormAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    eps: float = 1e-5


@register_op
class BatchNormOp(OpDef):
    """inputs: x [N,C,...], weight [C]?, bias [C]?, running_mean [C], running_var [C]."""

    name = "batch_norm"
    Attrs = BatchNormAttrs
    arity = Arity(5, 5, frozenset({1, 2}))

    @classmethod
    def infer(cls, inputs, attrs):
        x = inputs[0]
        require(x.rank >= 2, f"the input {x.describe()} has no channel axis")
        for spec, what in zip(inputs[1:], ("weight", "bias", "running mean", "running variance")):
            expect_shape(spec, [x.shape[1]], f"the {what}")
        return [like(x)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w, b, mean, var = inputs
        # Statistics are kept in fp32 even when the activations are bf16.
        y = F.batch_norm(x.float(), mean.float(), var.float(), None if w is None else w.float(),
                         None if b is None else b.float(), False, 0.0, attrs.eps)
        return y.to(x.dtype)
