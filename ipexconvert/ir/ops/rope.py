"""rope: rotary position embedding, rotate-half form (Llama, Qwen2, Mistral). inputs: x [b, heads, s, d],
cos and sin [b or 1, 1, s, d] (float32 or x's dtype); output like x:

    out = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])

computed in float32 and rounded once to x's dtype (eager bf16 rounds after each of its three ops)."""
from __future__ import annotations

import torch

from ..opdef import Arity, OpDef, register_op
from ._common import expect_dtype, expect_rank, like, require, same_dim


@register_op
class RopeOp(OpDef):
    name = "rope"
    arity = Arity(3, 3)

    @classmethod
    def infer(cls, inputs, attrs):
        x, cos, sin = inputs
        expect_rank(x, (4,), "x")
        expect_dtype(x, ("float32", "bfloat16"), "x")
        d = x.shape[3]
        require(isinstance(d, int) and d % 2 == 0, f"the head size {d} is not a fixed even number")
        for name, t in (("cos", cos), ("sin", sin)):
            expect_rank(t, (4,), name)
            expect_dtype(t, ("float32", x.dtype), name)
            require(t.shape[1] == 1 and same_dim(t.shape[2], x.shape[2]) and t.shape[3] == d
                    and (t.shape[0] == 1 or same_dim(t.shape[0], x.shape[0])),
                    f"{name} is {t.describe()}, not [batch or 1, 1, {x.shape[2]}, {d}] for x {x.describe()}")
        require(cos.dtype == sin.dtype and cos.shape == sin.shape, "cos and sin differ in dtype or shape")
        return [like(x, shape=x.shape)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, cos, sin = inputs
        xf, half = x.float(), x.shape[3] // 2
        rotated = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
        return (xf * cos.float() + rotated * sin.float()).to(x.dtype)
