"""The torch frontend's importer (frontend/base.py): a source (module, .pt2, Hugging Face folder,
checkpoint, example:NAME) -> torch.export -> core ATen -> IR through ATEN_MAP, with the eager module
as the oracle. Outputs are named by the source (examples, Hugging Face folders) or by the keys of a dict that
forward() returns (a decoder's logits / present_key_0 / ...); otherwise output_0, output_1, ..."""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Callable, Mapping, Optional

import torch

from ...errors import UserInputError
from ...ir import Program
from ...ir.dynamic_dims import DynamicDim, DynamicDims
from ..base import ImportedModel, ImportRequest, TraceSubject
from .export import decompose, export_module, program_from_exported
from .inputs import InputArg, check_example_inputs, make_example_inputs, parse_input_arg
from .sources import ResolvedSource, SourceRequest, from_module, resolve_source


class TorchImporter:
    may_state_ranges = False

    def accepts(self, model: Any) -> bool:
        return isinstance(model, torch.nn.Module) or isinstance(model, str) or hasattr(model, "__fspath__")

    def import_model(self, model: Any, request: ImportRequest, say: Callable[[str], None]) -> ImportedModel:
        say("loading model")
        if isinstance(model, torch.nn.Module):
            source = from_module(model)
        else:
            source = resolve_source(SourceRequest(location=str(model), model_factory=request.model_factory,
                                                  model_kwargs=request.model_kwargs, trust_pickle=request.trust_pickle))
        _prepare_inputs(source, request.example_inputs, [parse_input_arg(t) for t in request.inputs],
                        request.dynamic_dims)
        module = source.module
        if module is not None and request.before_trace is not None:
            module = request.before_trace(TraceSubject(module=module, location=source.record.location,
                                                       tokenizer_folder=source.tokenizer_folder, decoder=source.decoder))
        say("exporting with torch.export")
        ep = export_module(module, source.example_inputs, source.dynamic) if module is not None else source.exported
        program = program_from_exported(decompose(ep), source.dynamic, source.output_names or dict_output_names(ep))
        _ensure_example_inputs(program, source)
        return ImportedModel(program=program, record=source.record, eager=source.eager,
                             example_inputs=source.example_inputs, int_high=source.int_high,
                             tokenizer_folder=source.tokenizer_folder, decoder=source.decoder)


IMPORTER = TorchImporter()

_OUTPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def dict_output_names(ep: torch.export.ExportedProgram) -> Optional[list[str]]:
    """The keys of a forward() that returns a flat dict of tensors (`{"logits": ..., "present_key_0": ...}`, as a
    decoder of docs/decoders.md does), in order; None for any other output (named output_0, output_1, ...)."""
    spec = ep.call_spec.out_spec
    if spec is None or spec.type not in (dict, OrderedDict):
        return None
    keys = list(spec.context)
    if not all(child.is_leaf() for child in spec.children()) or len(keys) != spec.num_leaves:
        return None
    if not all(isinstance(k, str) and _OUTPUT_NAME.match(k) for k in keys):
        return None
    return keys


def _prepare_inputs(source: ResolvedSource, example_inputs: Optional[Mapping[str, torch.Tensor]],
                    inputs: list[InputArg], dynamic_dims: Optional[DynamicDims]) -> None:
    """Settle the example inputs and dynamic dims: explicit arguments win over the source's defaults."""
    if inputs:
        tensors, declared = make_example_inputs(inputs, int_high=source.int_high)
        source.example_inputs, source.dynamic = tensors, declared
    if example_inputs is not None:
        source.example_inputs = {k: torch.as_tensor(v) for k, v in example_inputs.items()}
        if not inputs:
            source.dynamic = {}
    if dynamic_dims is not None:
        source.dynamic = dynamic_dims
    if not source.example_inputs and source.exported is None:
        raise UserInputError("no example inputs: ipexconvert needs them to trace the model",
                             "pass --input NAME:SHAPE:DTYPE (e.g. --input x:batch,3,224,224:float32) "
                             "or --example-inputs inputs.safetensors")
    check_example_inputs(source.example_inputs)


def _ensure_example_inputs(program: Program, source: ResolvedSource) -> None:
    """A .pt2 saved without example inputs: make random ones from the graph's signature."""
    if source.example_inputs:
        return
    args = []
    for name in program.graph.inputs:
        spec = program.graph.values[name]
        shape = [d if isinstance(d, int) else DynamicDim(name=d, min=program.graph.dims[d].min, max=program.graph.dims[d].max)
                 for d in spec.shape]
        args.append(InputArg(name=name, shape=shape, dtype=spec.dtype))
    source.example_inputs, _ = make_example_inputs(args)
    check_example_inputs(source.example_inputs)
