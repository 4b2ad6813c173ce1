"""Post-ops: element-wise epilogues fused into conv2d / linear / matmul.

A binary post-op reads one extra node input (`operand` indexes node.inputs).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, model_validator

UNARY_POST_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}

BINARY_POST_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,
    "mul": torch.mul,
}


class PostOp(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    operand: Optional[int] = None  # index into the node's inputs, for binary post-ops

    @model_validator(mode="after")
    def _known_kind(self) -> "PostOp":
        # apply_post_ops and the fused kernels look the kind up by whether an operand is set.
        if self.operand is None and self.kind not in UNARY_POST_OPS:
            raise ValueError(f"post-op {self.kind!r} is not a unary post-op ({', '.join(UNARY_POST_OPS)})")
        if self.operand is not None and self.kind not in BINARY_POST_OPS:
            raise ValueError(f"post-op {self.kind!r} with an operand is not a binary post-op ({', '.join(BINARY_POST_OPS)})")
        return self

    def describe(self) -> str:
        return self.kind


def shift_operands(post_ops: Sequence[dict], by: int) -> list[dict]:
    """Post-ops (node attrs form) with every binary operand slot moved by `by`: for a rewrite that inserts
    `by` inputs before the operands (matmul -> linear adds a bias slot; quantizing adds the weight scales)."""
    return [{**p, "operand": p["operand"] + by} if p.get("operand") is not None else dict(p) for p in post_ops]


def append_binary(node, kind: str, operand: str) -> None:
    """Fuse `kind` (add, mul) with the value `operand` as the last post-op of `node` (an ir.graph.Node): the
    value becomes the node's last input and the post-op points at it."""
    node.inputs = [*node.inputs, operand]
    node.attrs = {**node.attrs, "post_ops": [*node.attrs.get("post_ops", []),
                                             {"kind": kind, "operand": len(node.inputs) - 1}]}


def apply_post_ops(y: torch.Tensor, post_ops: Sequence[PostOp], inputs: Sequence[Optional[torch.Tensor]]) -> torch.Tensor:
    for p in post_ops:
        if p.operand is None:
            y = UNARY_POST_OPS[p.kind](y)
        else:
            y = BINARY_POST_OPS[p.kind](y, inputs[p.operand])
    return y
