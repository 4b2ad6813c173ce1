"""Dtype names used in the IR and artifact (strings, so the JSON graph stays readable)."""
from __future__ import annotations

import torch

_BY_NAME: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_BY_DTYPE = {v: k for k, v in _BY_NAME.items()}

FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64"}


def to_torch(name: str) -> torch.dtype:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(_BY_NAME)}") from None


def to_name(dtype: torch.dtype) -> str:
    try:
        return _BY_DTYPE[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} is not supported by ipexconvert") from None


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES
