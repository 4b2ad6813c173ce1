"""The ONNX frontend's importer (frontend/base.py). `onnx` is imported only when an ONNX model
comes, so the other frontends work where it is not installed."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ...errors import UserInputError
from ..base import ImportedModel, ImportRequest


class OnnxImporter:
    may_state_ranges = True  # QDQ pairs

    def accepts(self, model: Any) -> bool:
        if type(model).__name__ == "ModelProto" and type(model).__module__.startswith("onnx"):
            return True
        return isinstance(model, (str, Path)) and str(model).lower().endswith(".onnx")

    def import_model(self, model: Any, request: ImportRequest, say: Callable[[str], None]) -> ImportedModel:
        try:
            from .convert import import_onnx
        except ImportError as e:
            raise UserInputError(f"reading ONNX models needs the onnx package ({e})",
                                 "pip install onnx (it is in ipexconvert's dependencies)") from None
        return import_onnx(model, request, say)


IMPORTER = OnnxImporter()
