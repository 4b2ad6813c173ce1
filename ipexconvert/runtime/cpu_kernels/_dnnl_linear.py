"""What the direct oneDNN linear kernels share: which post-op the matmul primitive fuses, and the
run function (contiguous input, output allocated here, unfused post-ops after)."""
from __future__ import annotations

import torch

from ...ir.postops import UNARY_POST_OPS, PostOp
from ._common import with_tail


def unary_prefix(post_ops: list[PostOp]) -> tuple[str, tuple[PostOp, ...]]:
    """(the first post-op's name if the primitive fuses it, else "", the post-ops left for torch)."""
    if post_ops and post_ops[0].operand is None and post_ops[0].kind in UNARY_POST_OPS:
        return post_ops[0].kind, tuple(post_ops[1:])
    return "", tuple(post_ops)


def linear_run(linear, out_dtype: torch.dtype, tail: tuple[PostOp, ...]):
    """The kernel function: out = linear(x) with x's leading dims, then the tail in torch."""
    n = linear.out_features

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous()
        out = torch.empty((*x.shape[:-1], n), dtype=out_dtype)
        linear.run(x, out)
        return out

    return with_tail(run, tail)
