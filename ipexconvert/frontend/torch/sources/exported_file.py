"""`model.pt2` written by torch.export.save.

torch.export.load is not safe on a file from someone you do not trust, and its documentation says
so: it unpickles the sample inputs, and pickled weights and constants, falling back to
`weights_only=False` when a safe load fails; it hands the shape expressions of the graph JSON to
`sympy.sympify` (which evaluates them as Python); `ExportedProgram.module()` executes the archive's
guard code; tree specs import modules named in the file; an AOTInductor package loads a shared
library. A check of the archive cannot follow every such path through torch's deserializer, so a
.pt2 is refused unless the user says they trust it (--trust-pickle), like a pickled nn.Module.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import torch

from ....errors import UnsafeCheckpointError, UserInputError
from ....manifest import SourceRecord
from .base import ResolvedSource, SourceRequest, sha256_of

REWRITE = "write it with torch.export.save(torch.export.export(model, args), 'model.pt2')"
CODE_RISK = ("{path} is a torch.export archive. torch.export.load runs code from such a file (it unpickles the "
             "sample inputs and constants and evaluates the shape expressions and guard code stored in it), so "
             "ipexconvert refuses it by default")
TRUST_FIX = ("if you trust whoever made this file, pass --trust-pickle; otherwise convert from the model's code and "
             "weights instead: a safetensors state dict with --model-factory, or a Hugging Face folder")


def matches(request: SourceRequest) -> bool:
    return request.location.endswith(".pt2")


def load(request: SourceRequest) -> ResolvedSource:
    path = Path(request.location)
    if not path.is_file():
        raise UserInputError(f"{path} does not exist", "check the path to the torch.export.save file")
    if not zipfile.is_zipfile(path):  # junk is a plain input error, whatever the trust
        raise UserInputError(f"{path} is not a readable torch.export archive (not a zip file)", REWRITE)
    if not request.trust_pickle:
        raise UnsafeCheckpointError(CODE_RISK.format(path=path), TRUST_FIX)
    try:
        ep = torch.export.load(str(path))
    except Exception as e:  # torch raises several types for a bad archive
        raise UserInputError(f"{path} is not a readable torch.export archive ({type(e).__name__}: {e})", REWRITE) from None
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
