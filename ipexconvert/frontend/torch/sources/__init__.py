"""Source readers, tried in order: the first whose `matches` accepts the request loads it."""
from __future__ import annotations

from pathlib import Path

import torch

from ....errors import UserInputError
from ....manifest import SourceRecord
from . import checkpoint, example, exported_file, hf_folder
from .base import ResolvedSource, SourceRequest, parse_model_kwargs

READERS = {
    "example": example,
    "export": exported_file,
    "hf-folder": hf_folder,
    "checkpoint": checkpoint,
}


def resolve_source(request: SourceRequest) -> ResolvedSource:
    for reader in READERS.values():
        if reader.matches(request):
            return reader.load(request)
    if not Path(request.location).exists():
        raise UserInputError(f"{request.location} does not exist",
                             "pass a .pt2 or .onnx file, a Hugging Face folder, a checkpoint (.safetensors/.pt) or example:NAME")
    raise UserInputError(f"cannot tell what kind of model {request.location} is",
                         "supported: model.pt2 (torch.export.save), model.onnx, a Hugging Face folder, "
                         ".safetensors/.pt/.pth checkpoints with --model-factory, or example:NAME")


def from_module(module: torch.nn.Module) -> ResolvedSource:
    return ResolvedSource(record=SourceRecord(kind="module", location=type(module).__qualname__), module=module.eval())


__all__ = ["READERS", "ResolvedSource", "SourceRequest", "resolve_source", "from_module", "parse_model_kwargs"]
