"""silu_mul: silu(a) * b, the gate of a SwiGLU MLP (Llama, Qwen2, Mistral) as one op. Two inputs a and b of the
same shape and float dtype; or one input x whose last dim holds a then b (the output of a merged gate/up
projection: a = x[..., :n/2], b = x[..., n/2:]). Computed in float32 and rounded once to the dtype."""
from __future__ import annotations

import torch

from ..opdef import Arity, OpDef, SpecError, register_op
from ._common import like


def halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(gate, up) of a merged gate/up output: the two halves of its last dim, as views."""
    half = x.shape[-1] // 2
    return x.narrow(-1, 0, half), x.narrow(-1, half, half)


@register_op
class SiluMulOp(OpDef):
    """inputs: a (the gate projection), b (the up projection); or x = [a | b] along the last dim."""

    name = "silu_mul"
    arity = Arity(1, 2)

    @classmethod
    def infer(cls, inputs, attrs):
        a = inputs[0]
        if a.dtype not in ("float32", "bfloat16", "float16"):
            raise SpecError(f"silu_mul takes float tensors, got {a.dtype}")
        if len(inputs) == 1:
            last = a.shape[-1] if a.shape else None
            if not isinstance(last, int) or last % 2:
                raise SpecError(f"silu_mul of one input needs a fixed even last dim (gate and up halves), got {a.describe()}")
            return [like(a, shape=[*a.shape[:-1], last // 2])]
        b = inputs[1]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise SpecError(f"silu_mul needs a and b of one shape and dtype, got {a.describe()} and {b.describe()}")
        return [like(a)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        a, b = halves(inputs[0]) if len(inputs) == 1 else inputs
        return (torch.nn.functional.silu(a.float()) * b.float()).to(a.dtype)
