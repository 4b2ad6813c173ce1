"""An .onnx file -> OnnxGraphModule -> torch.export -> the torch frontend's ATen -> IR table. The oracle is ONNX Runtime where it is installed (the
`onnx` extra's optional peer), else the OnnxGraphModule itself (our reading of the ONNX spec)."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable, Optional

import onnx
import torch

from ...errors import IpexConvertError, UserInputError
from ...ir.dynamic_dims import DynamicDim, DynamicDims
from ...manifest import SourceRecord
from ..base import ImportedModel, ImportRequest
from ..torch.export import decompose, export_module, program_from_exported
from ..torch.inputs import InputArg, check_example_inputs, make_example_inputs, parse_input_arg
from . import model_file, onnx_runtime, tensors
from .module import OnnxGraphModule
from .ops import Unconvertible

DEFAULT_DIM_MAX = 4096


def import_onnx(model: Any, request: ImportRequest, say: Callable[[str], None]) -> ImportedModel:
    say("reading the ONNX model")
    if isinstance(model, onnx.ModelProto):
        proto, location, digest = model, model.graph.name or "onnx-model", None
    else:
        path = Path(model)
        proto, location = model_file.load(path), str(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if not proto.graph.output:
        raise UserInputError(f"{location}: the ONNX graph declares no outputs",
                             "export it with the outputs it computes")
    opset = model_file.default_opset(proto)
    model_file.check_ops(proto, opset)
    module = OnnxGraphModule(proto, opset)
    declared = [_declared_input(py, i) for py, i in zip(module.input_names, module.onnx_inputs)]
    int_high = _vocabulary_size(proto) or 2
    examples, dynamic = make_example_inputs(declared, int_high=int_high)
    if request.inputs:
        examples, dynamic = make_example_inputs([parse_input_arg(t) for t in request.inputs], int_high=int_high)
    if request.example_inputs is not None:
        examples = {k: torch.as_tensor(v) for k, v in request.example_inputs.items()}
        dynamic = _matching(dynamic, examples)
    if request.dynamic_dims is not None:
        dynamic = request.dynamic_dims
    _check_names(examples, module.input_names)
    check_example_inputs(examples)
    say("tracing the ONNX graph with torch.export")
    ep = _traced(module, examples, dynamic)
    program = program_from_exported(decompose(ep), dynamic, module.output_names)
    _rename_inputs(program, module.input_names)
    _keep_declared_minimum(program, dynamic)
    oracle = _oracle(proto, module)
    return ImportedModel(program=program, record=SourceRecord(kind="onnx", location=location, sha256=digest),
                         eager=oracle, example_inputs=examples, int_high=int_high,
                         oracle="the ONNX graph run by torch" if oracle is module else "ONNX Runtime")


def _traced(module: OnnxGraphModule, examples: dict[str, torch.Tensor], dynamic: DynamicDims):
    """torch.export of the graph; a node the table refused while tracing is reported as itself,
    not as torch.export's failure."""
    try:
        return export_module(module, examples, dynamic, infer_ranges=True)
    except UserInputError as e:
        cause = e.__cause__
        while cause is not None:
            if isinstance(cause, IpexConvertError):
                raise cause from None
            cause = cause.__cause__ or cause.__context__
        raise


def _keep_declared_minimum(program, dynamic: DynamicDims) -> None:
    """torch.export gives inferred ranges a lower bound of 2 (it traces at 2 or more without
    specialising to 1); the declared minimum holds, as it does for the torch frontend's named Dims."""
    declared = {d.name: d.min for axes in dynamic.values() for d in axes.values()}
    for name, rng in program.graph.dims.items():
        if rng.min == 2 and declared.get(name, 2) < 2:
            rng.min = declared[name]


def _rename_inputs(program, names: list[str]) -> None:
    """torch.export renames placeholders (`W` -> `w`); the artifact keeps the model's input names."""
    graph = program.graph
    renamed = {old: new for old, new in zip(graph.inputs, names) if old != new}
    if not renamed:
        return
    clash = set(renamed.values()) & (set(graph.values) - set(renamed))
    if clash:
        raise UserInputError(f"ONNX input name(s) {sorted(clash)} clash with values inside the traced graph",
                             "rename the model's inputs")
    graph.inputs = [renamed.get(n, n) for n in graph.inputs]
    graph.values = {renamed.get(k, k): v for k, v in graph.values.items()}
    graph.outputs = [renamed.get(n, n) for n in graph.outputs]
    for node in graph.nodes:
        node.inputs = [renamed.get(i, i) if i is not None else None for i in node.inputs]


def _declared_input(py_name: str, value: onnx.ValueInfoProto) -> InputArg:
    """An input's declared type: symbolic dims (dim_param) and unknown ones become dynamic dims."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise UserInputError(f"ONNX input {value.name} is a {kind}, not a tensor", "ipexconvert imports tensor inputs only")
    ttype = value.type.tensor_type
    try:
        dtype = tensors.dtype_of(ttype.elem_type)
    except Unconvertible as e:
        raise UserInputError(f"ONNX input {value.name}: {e}", "give the model inputs of a supported type") from None
    if not ttype.HasField("shape"):
        raise UserInputError(f"ONNX input {value.name} has no declared shape",
                             f"declare it: --input {py_name}:SHAPE:{_dtype_name(dtype)}")
    shape: list[int | DynamicDim] = []
    for axis, d in enumerate(ttype.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            shape.append(int(d.dim_value))
        elif d.HasField("dim_value"):
            raise UserInputError(f"ONNX input {value.name} has size {d.dim_value} at axis {axis}",
                                 f"declare the input: --input {py_name}:SHAPE:{_dtype_name(dtype)}")
        else:
            name = _dim_name(d.dim_param) if d.dim_param else f"{py_name}_dim{axis}"
            shape.append(DynamicDim(name=name, min=1, max=DEFAULT_DIM_MAX))
    return InputArg(name=py_name, shape=shape, dtype=_dtype_name(dtype))


def _dtype_name(dtype: torch.dtype) -> str:
    from ...ir import dtypes
    return dtypes.to_name(dtype)


def _dim_name(param: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", param)
    name = "batch" if name.lower() in ("batch", "batch_size", "n") else name
    return f"d_{name}" if not name or name[0].isdigit() or name[0] == "x" else name


def _matching(dynamic: DynamicDims, examples: dict[str, torch.Tensor]) -> DynamicDims:
    """Keep the declared dynamic dims whose ranges the caller's example inputs fall in."""
    kept: dict[str, dict[int, DynamicDim]] = {}
    for name, axes in dynamic.items():
        t = examples.get(name)
        for axis, d in axes.items():
            if t is not None and axis < t.dim() and d.min <= t.shape[axis] <= d.max:
                kept.setdefault(name, {})[axis] = d
    return kept


def _check_names(examples: dict[str, torch.Tensor], expected: list[str]) -> None:
    if sorted(examples) != sorted(expected):
        raise UserInputError(f"example inputs {sorted(examples)} do not match the ONNX model's inputs {expected}",
                             "give one example tensor per model input, by name")


def _vocabulary_size(proto: onnx.ModelProto) -> Optional[int]:
    """Rows of the smallest embedding table a graph input indexes directly (for random token ids)."""
    shapes = {i.name: list(i.dims) for i in proto.graph.initializer}
    inputs = {i.name for i in proto.graph.input}
    sizes = [shapes[n.input[0]][0] for n in proto.graph.node
             if n.op_type == "Gather" and len(n.input) == 2 and n.input[0] in shapes and n.input[1] in inputs
             and shapes[n.input[0]]]
    return min(sizes) if sizes else None


def _oracle(proto: onnx.ModelProto, module: OnnxGraphModule) -> Callable[..., Any]:
    io = list(proto.graph.input) + list(proto.graph.output)
    if any(v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 for v in io):
        return module  # ORT's Python API has no bfloat16 arrays to feed or return
    sess = onnx_runtime.session(proto)
    if sess is None:
        return module  # not installed, or ORT lacks an op or a type: our own reading is the oracle then
    run = onnx_runtime.runner(sess)
    return lambda **inputs: run([inputs[n] for n in module.input_names])
