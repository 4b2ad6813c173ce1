"""Reading an ONNX file: protobuf only (nothing in it is executed), its external data files
checked to lie inside the model's folder, its opset checked, every op type looked up before
anything is traced."""
from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import external_data_helper

from ...errors import UnsupportedOpError, UserInputError
from .ops import ONNX_OPS

MIN_OPSET = 13
DEFAULT_DOMAINS = ("", "ai.onnx")


def load(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise UserInputError(f"{path} does not exist", "pass the path of an .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends: the file is not an ONNX model
        raise UserInputError(f"{path} is not a readable ONNX model ({type(e).__name__}: {str(e)[:200]})",
                             "pass a file written by onnx.save / torch.onnx.export") from None
    _check_external_data(model, path.parent)
    _check_structure(path)
    external_data_helper.load_external_data_for_model(model, str(path.parent.resolve()))
    return model


def _check_structure(path: Path) -> None:
    try:
        onnx.checker.check_model(str(path))  # by path: external data resolves beside the file
    except (onnx.checker.ValidationError, Exception) as e:  # the checker raises a few types
        raise UserInputError(f"{path} is not a valid ONNX model: {' '.join(str(e).split())[:300]}",
                             "re-export it, or run onnx.checker.check_model on it to see the problem") from None


def _check_external_data(model: onnx.ModelProto, folder: Path) -> None:
    """Weights kept beside the .onnx file: every location must be a plain relative path inside
    `folder`, and offset + length inside that file, before onnx reads a byte of it."""
    root = folder.resolve()
    for tensor in external_data_helper._get_all_tensors(model):
        if not external_data_helper.uses_external_data(tensor):
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        target = (root / location).resolve()
        if not location or os.path.isabs(location) or ".." in Path(location).parts or root not in target.parents:
            raise UserInputError(f"initializer {tensor.name} names external data {location!r} outside the model's folder",
                                 "keep external data files next to the .onnx file")
        if not target.is_file():
            raise UserInputError(f"initializer {tensor.name}: external data file {location} is missing",
                                 f"copy {location} next to the .onnx file")
        size = target.stat().st_size
        try:
            offset, length = int(info.get("offset", 0)), int(info.get("length", size))
        except ValueError:
            raise UserInputError(f"initializer {tensor.name}: unreadable external data offset/length", "re-export the model") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise UserInputError(f"initializer {tensor.name}: external data {location} is shorter than the model says",
                                 "the external data file is truncated or does not belong to this model")


def default_opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise UnsupportedOpError("the model imports no version of the default ONNX opset", "re-export it with opset 13 or newer")
    opset = max(versions)
    if opset < MIN_OPSET:
        raise UnsupportedOpError(f"the model uses ONNX opset {opset}; ipexconvert reads opset {MIN_OPSET} and newer",
                                 f"upgrade it: onnx.version_converter.convert_version(model, {MIN_OPSET})")
    return opset


def check_ops(model: onnx.ModelProto, opset: int) -> None:
    """Refuse, in one message, every op type the table has no entry for (or not at this opset)."""
    missing: dict[str, int] = {}
    for node in model.graph.node:
        entry = ONNX_OPS.get(node.op_type) if node.domain in DEFAULT_DOMAINS else None
        if entry is None or opset < entry.min_opset:
            key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
            missing[key] = missing.get(key, 0) + 1
    if missing:
        listed = ", ".join(f"{k} (x{n})" if n > 1 else k for k, n in sorted(missing.items()))
        raise UnsupportedOpError(f"the ONNX model uses ops ipexconvert cannot import: {listed}",
                                 "see docs/onnx.md for the supported ops; export the model without them, or "
                                 "convert the PyTorch model directly")
