"""Cast and CastLike (float -> int truncates toward zero, as ONNX and torch both do)."""
from __future__ import annotations

import torch

from .. import tensors
from ..values import Ints, dtype, tensor
from ._registry import OnnxNode, onnx_op


def _cast(x, to: torch.dtype):
    if isinstance(x, Ints) and to in (torch.int64, torch.int32, torch.bool):
        values = [bool(v) for v in x.values] if to == torch.bool else \
            [int(v) if isinstance(v, bool) else v for v in x.values]  # SymInts stay symbolic
        return Ints(values, x.rank, to)
    return tensor(x).to(to)


@onnx_op("Cast")
def cast(node: OnnxNode, inputs: list):
    node.attr("saturate")  # float8 targets only, which are refused by dtype_of
    return _cast(inputs[0], tensors.dtype_of(node.attr("to")))


@onnx_op("CastLike")
def cast_like(node: OnnxNode, inputs: list):
    node.attr("saturate")
    return _cast(inputs[0], dtype(inputs[1]))
