"""`model.pt2` written by torch.export.save."""
from __future__ import annotations

from pathlib import Path

import torch

from ...errors import UserInputError
from ...manifest import SourceRecord
from .base import ResolvedSource, SourceRequest, sha256_of


def matches(request: SourceRequest) -> bool:
    return request.location.endswith(".pt2")


def load(request: SourceRequest) -> ResolvedSource:
    path = Path(request.location)
    if not path.is_file():
        raise UserInputError(f"{path} does not exist", "check the path to the torch.export.save file")
    try:
        ep = torch.export.load(str(path))
    except Exception as e:  # torch raises several types for a bad archive
        raise UserInputError(f"{path} is not a readable torch.export archive ({type(e).__name__}: {e})",
                             "write it with torch.export.save(torch.export.export(model, args), 'model.pt2')") from None
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    example: dict[str, torch.Tensor] = {}
    positional = len(names)
    if ep.example_inputs is not None:
        args, kwargs = ep.example_inputs
        positional = len(args)
        example = dict(zip(names, list(args) + [kwargs[k] for k in kwargs]))
    module = ep.module()

    def eager(**inputs):
        # The exported module takes the original call's positional args, then keywords.
        values = [inputs[n] for n in names]
        return module(*values[:positional], **dict(zip(names[positional:], values[positional:])))

    return ResolvedSource(record=SourceRecord(kind="export", location=str(path), sha256=sha256_of(path)),
                          exported=ep, example_inputs=example, eager_fn=eager)
