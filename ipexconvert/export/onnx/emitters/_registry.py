"""EMITTERS: IR op -> the function writing its ONNX nodes (one file per op family)."""
from __future__ import annotations

from typing import Callable

from ....ir import Node
from ..builder import OnnxBuilder

EmitFn = Callable[[OnnxBuilder, Node], None]
EMITTERS: dict[str, EmitFn] = {}


def emits(*ops: str) -> Callable[[EmitFn], EmitFn]:
    def register(fn: EmitFn) -> EmitFn:
        for op in ops:
            if op in EMITTERS:
                raise RuntimeError(f"IR op {op} has two ONNX emitters")
            EMITTERS[op] = fn
        return fn
    return register
