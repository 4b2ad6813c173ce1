"""embedding: row lookup in a weight table. inputs: weight [V, D], indices (int)."""
from __future__ import annotations

import torch.nn.functional as F

from ..opdef import OpDef, register_op
from ..spec import TensorSpec


@register_op
class EmbeddingOp(OpDef):
    name = "embedding"
    aten_targets = ("aten.embedding.default",)

    @classmethod
    def from_aten(cls, target, args):
        return [args["weight"], args["indices"]], {}

    @classmethod
    def infer(cls, inputs, attrs):
        w, idx = inputs
        return [TensorSpec(dtype=w.dtype, shape=[*idx.shape, w.shape[1]])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return F.embedding(inputs[1], inputs[0])
