"""The arguments of an `aten` fallback node: an fx call's arguments as the JSON that ir/ops/aten.py
decodes at run time (tagged objects for tensor inputs, symbolic ints, dtypes, devices, layouts,
memory formats and non-finite floats)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ...ir import dtypes


def encode_arg(value: Any, tensor_index: Callable[[Any], int], symbolic: Callable[[Any], Any]) -> Any:
    """Python/fx argument -> JSON. tensor_index maps a tensor-valued fx node to its input slot."""
    if isinstance(value, (list, tuple)):
        return [encode_arg(v, tensor_index, symbolic) for v in value]
    if hasattr(value, "meta"):  # an fx node
        sym = symbolic(value)
        if sym is not None:
            return sym if isinstance(sym, int) else {"$sym": sym}
        return {"$in": tensor_index(value)}
    if isinstance(value, torch.dtype):
        return {"$dtype": dtypes.to_name(value)}
    if isinstance(value, torch.device):
        return {"$device": value.type}
    if isinstance(value, torch.layout):
        return {"$layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"$memory_format": str(value).removeprefix("torch.")}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store argument of type {type(value).__name__}")
