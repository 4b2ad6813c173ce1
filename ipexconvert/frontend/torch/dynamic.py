"""Declared dynamic dims (ir/dynamic_dims.py) as torch.export needs them."""
from __future__ import annotations

from typing import Mapping

import torch

from ...ir.dynamic_dims import DynamicDims


def dynamic_shapes_for(dynamic: DynamicDims, inputs: Mapping[str, torch.Tensor], infer_ranges: bool = False) -> dict | None:
    """torch.export's dynamic_shapes argument; one Dim object per name so equal names stay equal.

    infer_ranges: hints (Dim.DYNAMIC) instead of named Dims, for sources whose declared ranges are
    only guesses (an ONNX file's symbolic dims): torch.export then narrows each range to what the
    model allows (a position table of 512 rows caps seq at 512) and ties dims the model equates,
    instead of failing on the guess."""
    if not dynamic:
        return None
    dims: dict[str, torch.export.Dim] = {}
    shapes: dict[str, dict[int, torch.export.Dim] | None] = {}
    for name in inputs:
        axes = dynamic.get(name)
        if not axes:
            shapes[name] = None
            continue
        shapes[name] = {}
        for axis, d in axes.items():
            if d.name not in dims:
                dims[d.name] = torch.export.Dim.DYNAMIC(min=d.min, max=d.max) if infer_ranges \
                    else torch.export.Dim(d.name, min=d.min, max=d.max)
            shapes[name][axis] = dims[d.name]
    return shapes


def widen_for_tracing(dynamic: DynamicDims, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """torch.export specialises a dim whose example size is 1; trace with size 2 instead."""
    sizes: dict[str, int] = {}
    for name, axes in dynamic.items():
        for axis, d in axes.items():
            if name in inputs and inputs[name].shape[axis] == 1 and d.max >= 2:
                sizes[d.name] = 2
    out = dict(inputs)
    for name, axes in dynamic.items():
        for axis, d in axes.items():
            if name in out and d.name in sizes and out[name].shape[axis] == 1:
                out[name] = torch.cat([out[name]] * sizes[d.name], dim=axis)
    return out
