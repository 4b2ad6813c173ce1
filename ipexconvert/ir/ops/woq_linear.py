"""woq_linear: a linear layer with weight-only quantized weights (int8 or int4), float activations.

y = x @ dequant(W)^T + bias, post-ops, in x's dtype. W [N, K] is stored as codes with one float32
scale (and, for asymmetric int4, one uint8 zero point) per output channel and group of
`group_size` consecutive input features (group_size = K: one group per output channel):

  W[n, k] = (q[n, k] - zero[n, k // group_size]) * scale[n, k // group_size]

inputs: x [..., K] float32/bfloat16; codes (bits 8: int8 [N, K], symmetric, zero 0; bits 4: uint8
[N, K / 2], two unsigned 4-bit codes per byte, k even in the low nibble); scales float32
[N, K / group_size]; zero_points uint8 [N, K / group_size] or None (bits 4 only; None: symmetric,
codes stored +8, i.e. zero 8); bias float32 [N] or None; then post-op operands.

The reference dequantizes in float32 and runs F.linear in float32 (post-ops too), then casts to x's
dtype: what every kernel must match to float32 accumulation error.

activations "int8": each row of x is first rounded to int8 codes with its own scale,
xs = max|x| / 127 (1 for a row of zeros), xq = round_half_even(x / xs), and the layer computes on xq * xs:
what lets the kernels multiply integers (llama.cpp's Q4_0 / Q8_0 x Q8_0 do the same per block of 32). It adds
x's rounding (up to max|x| / 254 an element), so the conversion's accuracy check judges it.

bits 16 (made at load, never stored in an artifact): the codes are a bfloat16 weight [N, K] itself, one group a
row (group_size K), W = codes * scale. The GPU backend turns a decoder's bf16 linear layers into these
(backends/cuda/float_projections.py, scales of 1.0), so its decode-step GEMV and the joins that follow take them as
they take int8 / int4 layers. Its reference computes as linear does: x @ codes^T in x's dtype (float32
accumulation on a GPU), then times the scale, bias and post-ops in float32, one cast to x's dtype.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field

from ..opdef import Arity, OpDef, register_op
from ..postops import PostOp, apply_post_ops
from ..spec import TensorSpec
from ._common import expect_dtype, expect_rank, like, require, same_dim

SYMMETRIC_INT4_ZERO = 8  # symmetric int4 codes are stored as q + 8 (0..15)
CODE_DTYPE = {8: "int8", 4: "uint8", 16: "bfloat16"}
FLOAT_BITS = 16  # bits of the bf16 weights a GPU runs as woq_linear (made at load only)


class WoqLinearAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bits: Literal[4, 8, 16]
    group_size: int = Field(ge=1, le=1 << 30)
    post_ops: list[PostOp] = Field(default_factory=list)
    activations: Literal["float", "int8"] = "float"


def _static(spec: TensorSpec, what: str) -> list[int]:
    """A weight's shape as ints: codes, scales and zero points are stored tensors, so a dim name is a corrupt file."""
    require(all(isinstance(d, int) and not isinstance(d, bool) for d in spec.shape),
            f"{what} is {spec.describe()}: its shape must be fixed integers")
    return list(spec.shape)


def weight_shape(codes: TensorSpec, scales: TensorSpec, zero_points: Optional[TensorSpec], bias: Optional[TensorSpec],
                 bits: int, group_size: int) -> tuple[int, int]:
    """(N, K) of a quantized weight after every size and dtype check; SpecError otherwise."""
    expect_dtype(codes, (CODE_DTYPE[bits],), f"the {bits}-bit codes")
    expect_rank(codes, (2,), "the codes")
    n, cols = _static(codes, "the codes")
    k = cols * 2 if bits == 4 else cols
    require(n >= 1 and k >= 1, f"the codes {codes.describe()} are empty")
    require(k % group_size == 0, f"group_size {group_size} does not divide the {k} input features")
    require(bits != 4 or group_size % 2 == 0, f"group_size {group_size} is odd: 4-bit codes come in pairs of input features")
    groups = k // group_size
    require(bits != FLOAT_BITS or groups == 1, f"bf16 weights take one scale a row, not {groups} groups")
    expect_dtype(scales, ("float32",), "the scales")
    require(_static(scales, "the scales") == [n, groups],
            f"the scales are {scales.describe()}, not [{n}, {groups}] (one per output channel and group)")
    if zero_points is not None:
        require(bits == 4, "zero points are for 4-bit codes only (int8 weights are symmetric)")
        expect_dtype(zero_points, ("uint8",), "the zero points")
        require(_static(zero_points, "the zero points") == [n, groups],
                f"the zero points are {zero_points.describe()}, not [{n}, {groups}]")
    if bias is not None:
        expect_dtype(bias, ("float32",), "the bias")
        require(_static(bias, "the bias") == [n], f"the bias is {bias.describe()}, not [{n}]")
    return n, k


def round_rows_to_int8(x: torch.Tensor) -> torch.Tensor:
    """float32 x with every row (last dim) rounded to its int8 grid: xs = max|x| / 127, round_half_even(x / xs) * xs."""
    x = x.float()
    amax = x.abs().amax(dim=-1, keepdim=True)
    xs = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    return torch.round(x / xs) * xs


def unpack_int4(codes: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K / 2] of two codes each -> uint8 [N, K], k even from the low nibble."""
    return torch.stack([codes & 15, codes >> 4], dim=-1).reshape(codes.shape[0], -1)


def dequantize(codes: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor], bits: int,
               group_size: int) -> torch.Tensor:
    """The float32 weight [N, K]: (q - zero) * scale per group, the subtraction exact in float32."""
    q = (unpack_int4(codes) if bits == 4 else codes).float()
    if zero_points is not None:
        q = q - zero_points.float().repeat_interleave(group_size, dim=1)
    elif bits == 4:
        q = q - SYMMETRIC_INT4_ZERO
    return q * scales.float().repeat_interleave(group_size, dim=1)


@register_op
class WoqLinearOp(OpDef):
    """inputs: x [..., K], codes, scales, zero_points or None, bias or None, then post-op operands."""

    name = "woq_linear"
    Attrs = WoqLinearAttrs
    arity = Arity(5, 5, frozenset({3, 4}), post_op_operands=True)

    @classmethod
    def made_at_load(cls, attrs) -> bool:
        return attrs.bits == FLOAT_BITS  # (an artifact stores a bf16 layer as linear)

    @classmethod
    def infer(cls, inputs, attrs):
        x, codes, scales, zero_points, bias = inputs[:5]
        expect_dtype(x, ("float32", "bfloat16"), "the input")
        n, k = weight_shape(codes, scales, zero_points, bias, attrs.bits, attrs.group_size)
        require(x.rank >= 1 and same_dim(x.shape[-1], k),
                f"the input {x.describe()} does not have the weight's {k} input features")
        return [like(x, [*x.shape[:-1], n])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, codes, scales, zero_points, bias = inputs[:5]
        if attrs.bits == FLOAT_BITS:  # (no float32 copy of the weight: a prompt's GEMM in x's dtype)
            y = F.linear(x, codes.to(x.dtype)).float() * scales.float().view(-1)
            y = y if bias is None else y + bias.float()
        else:
            w = dequantize(codes, scales, zero_points, attrs.bits, attrs.group_size)
            rows = round_rows_to_int8(x) if attrs.activations == "int8" else x.float()
            y = F.linear(rows, w, None if bias is None else bias.float())
        # (the post-ops' operands alone in float32: widening every input copied the weight, 46 MB a GPU layer)
        used = {p.operand for p in attrs.post_ops if p.operand is not None}
        operands = [t.float() if i in used and t is not None and t.is_floating_point() else t
                    for i, t in enumerate(inputs)]
        return apply_post_ops(y, attrs.post_ops, operands).to(x.dtype)
