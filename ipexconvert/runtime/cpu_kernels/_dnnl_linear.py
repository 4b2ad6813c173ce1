"""What the direct oneDNN linear kernels share: which post-ops the matmul primitive fuses, and the
run function (contiguous input, output allocated here, unfused post-ops after)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ...ir.postops import UNARY_POST_OPS, PostOp
from ._common import with_tail


@dataclass(frozen=True)
class LinearPostOps:
    unary: str = ""  # fused first ("" for none)
    multiplier: Optional[torch.Tensor] = None  # a constant per-output-feature mul fused after it
    multiplier_slot: Optional[int] = None
    tail: tuple[PostOp, ...] = ()  # left for torch, after the call


def fusable(post_ops: list[PostOp], constants: tuple, out_features: int) -> LinearPostOps:
    """The longest prefix of [unary] [mul by a constant float32 [out_features] vector] the primitive takes."""
    rest = list(post_ops)
    unary = ""
    if rest and rest[0].operand is None and rest[0].kind in UNARY_POST_OPS:
        unary = rest.pop(0).kind
    if rest and rest[0].kind == "mul" and rest[0].operand is not None:
        slot = rest[0].operand
        factor = constants[slot] if slot < len(constants) else None
        if factor is not None and factor.dim() == 1 and factor.numel() == out_features:
            rest.pop(0)
            return LinearPostOps(unary, factor.float().contiguous(), slot, tuple(rest))
    return LinearPostOps(unary, tail=tuple(rest))


def linear_run(linear, out_dtype: torch.dtype, tail: tuple[PostOp, ...]):
    """The kernel function: out = linear(x) with x's leading dims, then the tail in torch."""
    n = linear.out_features

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous()
        out = torch.empty((*x.shape[:-1], n), dtype=out_dtype)
        linear.run(x, out)
        return out

    return with_tail(run, tail)
