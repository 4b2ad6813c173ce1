"""prologue_woq_linear: a weight-only quantized linear layer (woq_linear) of x after a row-wise prologue, one op so
that one GPU kernel computes both (the prologue's output never goes to memory):

  rms_norm: y = woq_linear(rms_norm(x, norm_weight, eps))   (a decoder's attention and MLP inputs)
  silu_mul: y = woq_linear(silu_mul(x))                     (x = [gate | up], the MLP's down projection)

The prologue's value is rounded to x's dtype, as the two nodes it replaces store it. inputs: x, codes, scales,
zero points or None, bias or None, the norm weight (rms_norm) or None, then post-op operands (as woq_linear's,
counted from here).

Made at load by the GPU backend (backends/cuda/prologues.py) where a rms_norm or silu_mul feeds only a
woq_linear; never written in an artifact (internal)."""
from __future__ import annotations

from typing import Literal, Optional

from ..opdef import Arity, OpDef, register_op
from ._common import expect_dtype, expect_shape, like, require, same_dim
from .rms_norm import RmsNormAttrs, RmsNormOp
from .silu_mul import SiluMulOp
from .woq_linear import WoqLinearAttrs, WoqLinearOp, weight_shape


class PrologueWoqLinearAttrs(WoqLinearAttrs):
    prologue: Literal["rms_norm", "silu_mul"]
    eps: Optional[float] = None  # rms_norm's


def prologue_of(x, norm_weight, attrs: PrologueWoqLinearAttrs, k: int):
    """The prologue's value (reference semantics of the op it came from)."""
    if attrs.prologue == "rms_norm":
        return RmsNormOp.reference([x, norm_weight], RmsNormAttrs(normalized_shape=[k], eps=attrs.eps), {})
    return SiluMulOp.reference([x], None, {})


@register_op
class PrologueWoqLinearOp(OpDef):
    name = "prologue_woq_linear"
    Attrs = PrologueWoqLinearAttrs
    arity = Arity(6, 6, frozenset({3, 4, 5}), post_op_operands=True)
    internal = True

    @classmethod
    def infer(cls, inputs, attrs):
        x, codes, scales, zero_points, bias, norm_weight = inputs[:6]
        expect_dtype(x, ("float32", "bfloat16"), "the input")
        n, k = weight_shape(codes, scales, zero_points, bias, attrs.bits, attrs.group_size)
        require(x.rank >= 1, f"the input {x.describe()} has no feature dim")
        if attrs.prologue == "rms_norm":
            require(same_dim(x.shape[-1], k), f"the input {x.describe()} does not have the weight's {k} input features")
            if norm_weight is not None:
                expect_shape(norm_weight, [k], "the norm weight")
        else:
            require(same_dim(x.shape[-1], 2 * k),
                    f"the input {x.describe()} is not the gate and up halves of the weight's {k} input features")
            require(norm_weight is None, "silu_mul takes no norm weight")
        return [like(x, [*x.shape[:-1], n])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, codes = inputs[0], inputs[1]
        k = codes.shape[1] * (2 if attrs.bits == 4 else 1)
        h = prologue_of(x, inputs[5], attrs, k)
        woq = WoqLinearAttrs(**attrs.model_dump(include=set(WoqLinearAttrs.model_fields)))
        return WoqLinearOp.reference([h, *inputs[1:]], woq, dims)
