"""woq_linear_rope_kv_write: a decoder layer's merged q/k/v projection as a weight-only quantized linear layer
(woq_linear, or prologue_woq_linear with its rms_norm of x) and the rope_kv_write that alone reads it, one op so
that one GPU kernel computes both: the projection's last program rotates q and k and writes k and v into the
caches, and the projection never goes to memory.

  qkv = woq_linear(prologue(x))     (rounded to x's dtype, as the node it replaces stores it)
  q, cache_key, cache_value = rope_kv_write(qkv, cos, sin, cache_key, cache_value, position)

inputs: x, codes, scales, zero points or None, bias or None, the norm weight (prologue rms_norm) or None, then
rope_kv_write's cos, sin, cache_key, cache_value and position; outputs: rope_kv_write's (the caches written in
place by a kernel). The projection has no post-ops.

Made at load by the GPU backend (backends/cuda/epilogues.py); never written in an artifact (internal)."""
from __future__ import annotations

from typing import Literal, Optional

from ..opdef import Arity, OpDef, register_op
from ._common import require
from .prologue_woq_linear import PrologueWoqLinearAttrs, PrologueWoqLinearOp
from .rope_kv_write import RopeKvWriteOp
from .woq_linear import WoqLinearAttrs, WoqLinearOp


class WoqLinearRopeKvWriteAttrs(PrologueWoqLinearAttrs):
    prologue: Optional[Literal["rms_norm"]] = None  # None: the projection is a plain woq_linear


def projection(inputs: list, attrs: WoqLinearRopeKvWriteAttrs, dims) -> tuple:
    """(the op that computes the projection, its attrs, its inputs)."""
    if attrs.prologue is None:
        return WoqLinearOp, WoqLinearAttrs(**attrs.model_dump(include=set(WoqLinearAttrs.model_fields))), inputs[:5]
    return PrologueWoqLinearOp, PrologueWoqLinearAttrs(**attrs.model_dump(exclude={"prologue"}),
                                                       prologue=attrs.prologue), inputs[:6]


@register_op
class WoqLinearRopeKvWriteOp(OpDef):
    name = "woq_linear_rope_kv_write"
    Attrs = WoqLinearRopeKvWriteAttrs
    arity = Arity(11, 11, frozenset({3, 4, 5}), post_op_operands=True)  # (the projection takes none: infer says so)
    internal = True

    @classmethod
    def infer(cls, inputs, attrs):
        require(not attrs.post_ops, "the projection of woq_linear_rope_kv_write has no post-ops")
        require(attrs.prologue is not None or inputs[5] is None, "a norm weight without a prologue")
        op, op_attrs, projection_inputs = projection(list(inputs), attrs, None)
        qkv, = op.infer(projection_inputs, op_attrs)
        return RopeKvWriteOp.infer([qkv, *inputs[6:]], None)

    @classmethod
    def reference(cls, inputs, attrs, dims):
        op, op_attrs, projection_inputs = projection(list(inputs), attrs, dims)
        qkv = op.reference(projection_inputs, op_attrs, dims)
        return RopeKvWriteOp.reference([qkv, *inputs[6:]], None, dims)
