"""Reduce* ops: axes from the attribute or (opset 13 ReduceSum, 18 the rest) the input; keepdims;
noop_with_empty_axes."""
from __future__ import annotations

from typing import Callable

import torch

from ..values import tensor
from ._axes import axes_of, normalize
from ._registry import OnnxNode, onnx_op


def _max(t, dims, keep):
    return torch.amax(t, dim=dims, keepdim=keep) if t.numel() else torch.full(_shape(t, dims, keep), float("-inf"), dtype=t.dtype)


def _min(t, dims, keep):
    return torch.amin(t, dim=dims, keepdim=keep) if t.numel() else torch.full(_shape(t, dims, keep), float("inf"), dtype=t.dtype)


def _prod(t, dims, keep):
    for d in sorted(dims, reverse=True):
        t = torch.prod(t, dim=d, keepdim=keep)
    return t


def _shape(t, dims, keep):
    return [1 if i in dims else s for i, s in enumerate(t.shape) if keep or i not in dims]


REDUCERS: dict[str, Callable] = {
    "ReduceSum": lambda t, d, k: torch.sum(t, dim=d, keepdim=k),
    "ReduceMean": lambda t, d, k: torch.mean(t, dim=d, keepdim=k),
    "ReduceMax": _max,
    "ReduceMin": _min,
    "ReduceProd": _prod,
    "ReduceL1": lambda t, d, k: torch.sum(torch.abs(t), dim=d, keepdim=k),
    "ReduceL2": lambda t, d, k: torch.sqrt(torch.sum(t * t, dim=d, keepdim=k)),
    "ReduceSumSquare": lambda t, d, k: torch.sum(t * t, dim=d, keepdim=k),
    "ReduceLogSum": lambda t, d, k: torch.log(torch.sum(t, dim=d, keepdim=k)),
    "ReduceLogSumExp": lambda t, d, k: torch.logsumexp(t, dim=d, keepdim=k),
}


def _reducer(name: str, fn: Callable):
    def run(node: OnnxNode, inputs: list):
        t = tensor(inputs[0])
        axes = axes_of(node, inputs, 1)
        noop = node.attr("noop_with_empty_axes", 0)
        if not axes:
            if noop:
                return t
            axes = list(range(t.dim()))
        keep = bool(node.attr("keepdims", 1))
        dims = sorted({normalize(a, t.dim()) for a in axes})
        return fn(t, dims, keep)
    return run


for _name, _fn in REDUCERS.items():
    onnx_op(_name)(_reducer(_name, _fn))
