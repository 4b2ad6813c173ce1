"""Every module here registers its entries in ONNX_OPS on import (see _registry.py)."""
from importlib import import_module
from pathlib import Path

from ._registry import ONNX_OPS, OnnxNode, OnnxOp, Unconvertible, onnx_op

for _file in sorted(Path(__file__).parent.glob("[a-z]*.py")):
    import_module(f"{__name__}.{_file.stem}")

__all__ = ["ONNX_OPS", "OnnxNode", "OnnxOp", "Unconvertible", "onnx_op"]
