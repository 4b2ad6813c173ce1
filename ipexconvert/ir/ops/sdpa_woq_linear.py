"""sdpa_woq_linear: a decoder layer's attention and the output projection that alone reads it (a weight-only
quantized linear layer over the heads merged), one op so that the GPU's projection combines the attention's key
splits as it reads its input: the attention kernel only stores each split's partial sums, and neither its ticket
nor its last program's combine runs.

  y = woq_linear(reshape(permute(sdpa(q, k, v, mask), [0, 2, 1, 3]), [batch, seq, heads * head_dim]))

The attention's value is rounded to q's dtype, as the node it replaces stores it. inputs: q, k, v, the mask or None
(sdpa's), then codes, scales, zero points or None, bias or None and post-op operands (woq_linear's, counted from
here).

Made at load by the GPU backend (backends/cuda/attention_prologues.py); never written in an artifact (internal)."""
from __future__ import annotations

from ..dims import mul
from ..opdef import Arity, OpDef, register_op
from ..postops import shift_operands
from ._common import expect_rank, like, require
from .sdpa import SdpaAttrs, SdpaOp
from .woq_linear import WoqLinearAttrs, WoqLinearOp


class SdpaWoqLinearAttrs(WoqLinearAttrs):
    attention: SdpaAttrs  # the sdpa node's (never quantizing, never causal)


OWN_INPUTS = 8  # q, k, v, mask, codes, scales, zero points, bias: post-op operands follow
WOQ_INPUTS = 5  # woq_linear's own (x, codes, scales, zero points, bias)


def woq_attrs(attrs: SdpaWoqLinearAttrs) -> WoqLinearAttrs:
    """The projection's attrs as woq_linear's, its post-op operands counted from woq_linear's own inputs."""
    post_ops = shift_operands([p.model_dump(exclude_none=True) for p in attrs.post_ops], WOQ_INPUTS - OWN_INPUTS)
    return WoqLinearAttrs(**{**attrs.model_dump(include=set(WoqLinearAttrs.model_fields)), "post_ops": post_ops})


@register_op
class SdpaWoqLinearOp(OpDef):
    name = "sdpa_woq_linear"
    Attrs = SdpaWoqLinearAttrs
    arity = Arity(8, 8, frozenset({3, 6, 7}), post_op_operands=True)
    internal = True

    @classmethod
    def infer(cls, inputs, attrs):
        require(attrs.attention.quantize is None and not attrs.attention.is_causal,
                "the attention of sdpa_woq_linear neither quantizes nor is causal")
        expect_rank(inputs[0], (4,), "the query")
        heads, = SdpaOp.infer(list(inputs[:4]), attrs.attention)
        b, h, length, dv = heads.shape
        return WoqLinearOp.infer([like(heads, [b, length, mul(h, dv)]), *inputs[4:]], woq_attrs(attrs))

    @classmethod
    def reference(cls, inputs, attrs, dims):
        y = SdpaOp.reference(list(inputs[:4]), attrs.attention, dims)
        b, h, length, dv = y.shape
        merged = y.transpose(1, 2).reshape(b, length, h * dv)
        return WoqLinearOp.reference([merged, *inputs[4:]], woq_attrs(attrs), dims)
