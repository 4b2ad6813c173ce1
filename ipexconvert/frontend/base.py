"""The importer seam: every frontend turns a model into an IR Program plus an eager oracle.

`import_model` asks the importers in IMPORTERS, in order, which one takes the model; that one
returns an ImportedModel: the graph (weights included), what the source was, its example inputs, and
`eager`, the reference the conversion checks the artifact against (a torch module for torch
sources; for an ONNX file ONNX Runtime, or without it the ONNX graph run by torch). The rest of the conversion
(passes, calibration, the accuracy check, the artifact) sees only this. Whatever the importer, a graph whose
signature is a decoder's gets its `decoder` record here (decoder_signature.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol

import torch

from ..errors import UserInputError
from ..ir import Program
from ..ir.dynamic_dims import DynamicDims
from ..manifest import DecoderRecord, SourceRecord
from .decoder_signature import decoder_from_signature


@dataclass
class TraceSubject:
    """The eager torch module a frontend is about to trace, and what the source says about it (ImportRequest.before_trace)."""

    module: torch.nn.Module
    location: str
    tokenizer_folder: Optional[Path] = None
    decoder: Optional[DecoderRecord] = None


@dataclass
class ImportRequest:
    """What the caller says about the model besides the model itself (the config's source fields)."""

    example_inputs: Optional[Mapping[str, torch.Tensor]] = None
    inputs: list[str] = field(default_factory=list)  # NAME:SHAPE:DTYPE declarations
    dynamic_dims: Optional[DynamicDims] = None
    model_factory: Optional[str] = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    trust_pickle: bool = False
    # Called by a frontend that traces an eager torch module, before tracing it: returns the module to trace instead
    # (the same parameter names; the eager oracle stays the original). Weight-only GPTQ / AWQ (quant/weight_only_inc.py)
    # run here, so the float weights AWQ rescales are the traced program's. Frontends without such a module skip it.
    before_trace: Optional[Callable[[TraceSubject], torch.nn.Module]] = None


@dataclass
class ImportedModel:
    program: Program
    record: SourceRecord
    eager: Callable[..., Any]  # the accuracy oracle, called with keyword inputs
    example_inputs: dict[str, torch.Tensor]
    int_high: int = 100  # upper bound for random integer inputs (vocab size for token ids)
    tokenizer_folder: Optional[Path] = None  # a Hugging Face tokenizer for --calib-text, where the model has one
    oracle: str = "eager PyTorch"  # what `eager` is, in messages and the accuracy record
    decoder: Optional[DecoderRecord] = None  # a causal LM with its KV cache as inputs/outputs (generate())


class Importer(Protocol):
    # Whether the models it reads can state their own int8 ranges (ONNX's QuantizeLinear/DequantizeLinear
    # pairs): then --dtype int8 may run without calibration data (quant/model_ranges.py).
    may_state_ranges: bool

    def accepts(self, model: Any) -> bool:
        """Whether this frontend reads `model` (a module, a path, `example:NAME`)."""

    def import_model(self, model: Any, request: ImportRequest, say: Callable[[str], None]) -> ImportedModel:
        ...


# name -> module whose IMPORTER reads that kind of model, asked in this order (torch last: it reads
# modules, checkpoints, folders and example names, and says clearly what it cannot read).
IMPORTERS: dict[str, str] = {"onnx": "ipexconvert.frontend.onnx.importer",
                             "torch": "ipexconvert.frontend.torch.importer"}


def importer_for(model: Any) -> Importer:
    """The first importer that reads `model`."""
    for module in IMPORTERS.values():
        importer = import_module(module).IMPORTER
        if importer.accepts(model):
            return importer
    raise UserInputError(f"no frontend reads {model!r}", f"supported: {', '.join(IMPORTERS)} models")


def import_model(model: Any, request: ImportRequest, say: Callable[[str], None] = lambda _m: None) -> ImportedModel:
    imported = importer_for(model).import_model(model, request, say)
    imported.decoder = _decoder(imported)
    return imported


def _decoder(imported: ImportedModel) -> Optional[DecoderRecord]:
    """The decoder record, read off the signature for every source (decoder_signature.py); a source that knows the
    model's token ids (a Hugging Face config) supplies its own record, which must describe the same signature."""
    found = decoder_from_signature(imported.program.graph, imported.record.location)
    known = imported.decoder
    if known is None:
        return found
    if found is None or (found.input_ids, found.logits, found.cache, found.cache_dim) != \
            (known.input_ids, known.logits, known.cache, known.cache_dim):
        raise RuntimeError(f"ipexconvert bug: the decoder record of {imported.record.location} does not match its "
                           "graph's signature")
    return known
