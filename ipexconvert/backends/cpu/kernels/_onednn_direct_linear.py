"""What the direct oneDNN linear kernels share: which post-ops the matmul primitive fuses, and the
run function (contiguous input, output allocated here, unfused post-ops after)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .. import onednn_direct
from ....ir.postops import UNARY_POST_OPS, PostOp
from ....runtime.bound_plan import buffer
from ._torch_onednn import with_tail


@dataclass(frozen=True)
class LinearPostOps:
    """The post-ops the matmul primitive takes: [unary] [mul by a constant float32 [out_features]]."""

    unary: str = ""  # "" for none
    multiplier: Optional[torch.Tensor] = None  # fused after the unary
    multiplier_slot: Optional[int] = None  # the node input it comes from (the kernel holds it)
    tail: tuple[PostOp, ...] = ()  # left for torch, after the call


def fused_prefix(post_ops: list[PostOp], constants: tuple, out_features: int) -> LinearPostOps:
    """The longest prefix of the node's post-ops the primitive fuses; the rest is the torch tail.

    The mul is how fold_requantize hands over a SmoothQuant multiplier of the next layer."""
    rest = list(post_ops)
    unary = rest.pop(0).kind if rest and rest[0].operand is None and rest[0].kind in UNARY_POST_OPS else ""
    if rest and rest[0].kind == "mul" and rest[0].operand is not None and rest[0].operand < len(constants):
        factor = constants[rest[0].operand]
        if factor is not None and factor.dim() == 1 and factor.numel() == out_features:
            slot = rest.pop(0).operand
            return LinearPostOps(unary, factor.float().contiguous(), slot, tuple(rest))
    return LinearPostOps(unary, tail=tuple(rest))


def linear_run(linear, out_dtype: torch.dtype, tail: tuple[PostOp, ...], name: str):
    """The kernel function: out = linear(x) with x's leading dims, then the tail in torch."""
    n = linear.out_features

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous()
        out = torch.empty((*x.shape[:-1], n), dtype=out_dtype)
        try:
            linear.run(x, out)
        except (ValueError, TypeError) as e:  # an input that does not fit the layer (onednn_direct.py, arguments)
            raise onednn_direct.refused(name, e) from None
        return out

    return with_tail(run, tail)


def linear_bind(linear, out_dtype: torch.dtype, tail: tuple[PostOp, ...]):
    """Kernel.bind for linear_run's function: one call of the layer into an output made once (None with a tail)."""
    n = linear.out_features

    def bind(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        if tail or not x.is_contiguous():
            return None
        out = buffer((*x.shape[:-1], n), out_dtype)
        return linear.bind(x, out), [out]

    return bind
