"""silu_mul: silu(a) * b, the gate of a SwiGLU MLP (Llama, Qwen2, Mistral) as one op. a and b have the same
shape and float dtype; computed in float32 and rounded once to that dtype."""
from __future__ import annotations

import torch

from ..opdef import Arity, OpDef, SpecError, register_op
from ._common import like


@register_op
class SiluMulOp(OpDef):
    """inputs: a (the gate projection), b (the up projection)."""

    name = "silu_mul"
    arity = Arity(2, 2)

    @classmethod
    def infer(cls, inputs, attrs):
        a, b = inputs
        if a.shape != b.shape or a.dtype != b.dtype:
            raise SpecError(f"silu_mul needs a and b of one shape and dtype, got {a.describe()} and {b.describe()}")
        if a.dtype not in ("float32", "bfloat16", "float16"):
            raise SpecError(f"silu_mul takes float tensors, got {a.dtype}")
        return [like(a)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        a, b = inputs
        return (torch.nn.functional.silu(a.float()) * b.float()).to(a.dtype)
