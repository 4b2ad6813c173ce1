"""torch.export -> IR.

The module is exported with torch.export (dynamic dims preserved), decomposed to
core ATen except for the ops our opset models directly, and each fx node is
mapped through the ATen -> IR table (aten_map/). Anything else becomes an `aten`
fallback node when it is a safe core ATen op, or a clear error naming the op and
the source line.
"""
from __future__ import annotations

import operator
from typing import Any, Mapping

import sympy
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from ...errors import UnsupportedOpError, UserInputError
from ...ir import Graph, Node, Program, TensorSpec, get_op
from ...ir import dtypes
from ...ir.dims import DimExprError
from ...ir.dims import check as check_dim
from ...ir.dynamic_dims import DynamicDims
from ...ir.ops.aten import refusal_reason
from ...ir.spec import DimRange
from .aten_map import ATEN_MAP, Unconvertible
from .dynamic import dynamic_shapes_for, widen_for_tracing
from .fallback_args import encode_arg

# Nodes that only check assumptions at trace time; they carry no computation.
_SKIPPED_TARGETS = {
    "aten._assert_tensor_metadata.default",
    "aten._assert_scalar.default",
    "aten.sym_constrain_range_for_size.default",
    "aten.sym_constrain_range.default",
    "aten._assert_async.msg",
}
_MAX_DIM = 1 << 20  # stand-in for an unbounded dim range


def export_module(module: torch.nn.Module, example_inputs: Mapping[str, torch.Tensor], dynamic: DynamicDims,
                  infer_ranges: bool = False) -> ExportedProgram:
    module = module.eval()
    example_inputs = widen_for_tracing(dynamic, example_inputs)
    try:
        with torch.no_grad():
            return torch.export.export(module, (), dict(example_inputs),
                                       dynamic_shapes=dynamic_shapes_for(dynamic, example_inputs, infer_ranges),
                                      strict=False)
    except Exception as e:  # torch.export raises many types; all mean "could not trace"
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserInputError(
            f"torch.export could not capture the model: {first_line}",
            "check that the example inputs match forward()'s arguments and that the declared dynamic dims "
            "(--input NAME:batchx128:int64) really vary; data-dependent control flow must be rewritten with torch.cond",
        ) from e


def _unconvertible_targets(ep: ExportedProgram) -> set[str]:
    """Kept targets with a call the opset cannot model (softmax with a dtype, ceil-mode pooling) and that may
    not run as an aten fallback either (not core ATen): those must be decomposed instead of kept."""
    found: set[str] = set()
    for node in ep.graph.nodes:
        target = str(node.target)
        if node.op != "call_function" or target not in ATEN_MAP or target in found or refusal_reason(target) is None:
            continue
        try:
            ATEN_MAP[target].convert(target, _Converter._bind_schema(node))
        except Unconvertible:
            found.add(target)
        except Exception:  # only a pre-scan: conversion proper reports real problems
            pass
    return found


def decompose(ep: ExportedProgram) -> ExportedProgram:
    """Lower to core ATen, keeping the ops the opset models (conv, linear, norms, attention ...)."""
    table = torch.export.default_decompositions()
    keep = set(ATEN_MAP) - _unconvertible_targets(ep)
    for op in list(table.keys()):
        if str(op) in keep:
            table.pop(op)
    try:
        return ep.run_decompositions(table)
    except Exception as e:  # torch raises assorted internal errors here
        raise UnsupportedOpError(
            f"torch could not lower the exported program to core ATen ({type(e).__name__}: {str(e).strip()[:200]})",
            "re-export the model in this process (pass the module or a checkpoint instead of a saved .pt2), "
            "or simplify its dynamic shapes") from e


def _source_line(node: torch.fx.Node) -> str | None:
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    return lines[-1] if lines else None


class _Converter:
    def __init__(self, ep: ExportedProgram, dynamic: DynamicDims, output_names: list[str] | None):
        self.ep = ep
        self.dynamic = dynamic
        self.output_names = output_names
        self.values: dict[str, TensorSpec] = {}
        self.nodes: list[Node] = []
        self.weights: dict[str, torch.Tensor] = {}
        self.value_of: dict[torch.fx.Node, list[str]] = {}  # fx node -> IR value names
        self.symbolic: dict[torch.fx.Node, Any] = {}        # fx node -> int or dim expression
        self.symbols: dict[sympy.Symbol, sympy.Symbol] = {}  # export's s0 -> our "batch"
        self.dims: dict[str, DimRange] = {}

    # ---- symbols -------------------------------------------------------
    def _bind_input_symbols(self, name: str, fake: torch.Tensor) -> None:
        declared = self.dynamic.get(name, {})
        for axis, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt):
                expr = size.node.expr
                if isinstance(expr, sympy.Symbol) and expr not in self.symbols:
                    dim = declared.get(axis)
                    dim_name = dim.name if dim is not None else f"{name}_dim{axis}"
                    self.symbols[expr] = sympy.Symbol(dim_name)
                    rng = self.ep.range_constraints.get(expr)
                    lo = int(rng.lower) if rng is not None else 1
                    hi = int(rng.upper) if rng is not None and rng.upper.is_finite else _MAX_DIM
                    if dim is not None:
                        lo, hi = max(lo, dim.min), min(hi, dim.max)
                    self.dims[dim_name] = DimRange(min=lo, max=hi)

    def dim(self, size: Any) -> int | str:
        if isinstance(size, int):
            return size
        expr = size.node.expr if isinstance(size, torch.SymInt) else size
        expr = sympy.sympify(expr).xreplace(self.symbols)  # torch's own sympy objects: trusted, conversion side
        if expr.is_Integer:
            return int(expr)
        text = str(expr)
        try:
            check_dim(text)  # the loader parses stored sizes with dims' grammar only: refuse here what it would refuse
        except DimExprError as e:
            raise UnsupportedOpError(f"the model computes a size ipexconvert cannot store: {e}",
                                     "report this model to the ipexconvert maintainers") from None
        return text

    def spec(self, fake: torch.Tensor) -> TensorSpec:
        fmt = "contiguous"
        if fake.dim() == 4 and not fake.is_contiguous() and fake.is_contiguous(memory_format=torch.channels_last):
            fmt = "channels_last"
        return TensorSpec(dtype=dtypes.to_name(fake.dtype), shape=[self.dim(s) for s in fake.shape], memory_format=fmt)

    def symbolic_of(self, node: Any) -> Any:
        """int or expression string if this fx node is a symbolic scalar, else None."""
        if node in self.symbolic:
            return self.symbolic[node]
        return None

    # ---- argument mapping ----------------------------------------------
    def _tensor_value(self, node: torch.fx.Node) -> str:
        names = self.value_of.get(node)
        if names is None or len(names) != 1:
            raise UnsupportedOpError(f"value {node.name} is not a single tensor", "report this model to the ipexconvert maintainers")
        return names[0]

    def _plain_attr(self, value: Any) -> Any:
        """Attributes may hold symbolic sizes (reshape targets): turn fx nodes into expressions."""
        if isinstance(value, (list, tuple)):
            return [self._plain_attr(v) for v in value]
        if isinstance(value, torch.fx.Node):
            sym = self.symbolic_of(value)
            if sym is None:
                raise Unconvertible("tensor inside an attribute")
            return sym
        return value

    @staticmethod
    def _bind_schema(node: torch.fx.Node) -> dict[str, Any]:
        bound: dict[str, Any] = {}
        for i, arg in enumerate(node.target._schema.arguments):
            if i < len(node.args):
                bound[arg.name] = node.args[i]
            elif arg.name in node.kwargs:
                bound[arg.name] = node.kwargs[arg.name]
            elif arg.has_default_value():
                bound[arg.name] = arg.default_value
            else:
                bound[arg.name] = None
        return bound

    # ---- nodes ----------------------------------------------------------
    def convert(self) -> Program:
        sig = self.ep.graph_signature
        kinds = {spec.arg.name: spec for spec in sig.input_specs}
        graph_inputs: list[str] = []
        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                spec = kinds[node.name]
                if spec.kind == InputKind.USER_INPUT:
                    val = node.meta["val"]
                    if not isinstance(val, torch.Tensor):
                        raise UserInputError(f"input {node.name} is not a tensor", "pass tensors only as model inputs")
                    self._bind_input_symbols(node.name, val)
                    self.values[node.name] = self.spec(val)
                    self.value_of[node] = [node.name]
                    graph_inputs.append(node.name)
                else:
                    self._add_weight(node, spec)
            elif node.op == "call_function":
                self._convert_call(node)
            elif node.op == "output":
                outputs = self._outputs(node)
        graph = Graph(inputs=graph_inputs, outputs=outputs, nodes=self.nodes, values=self.values,
                      constants=list(self.weights), dims=self.dims)
        program = Program(graph, self.weights)
        _rename_outputs(program, self.output_names)
        return program

    def _add_weight(self, node: torch.fx.Node, spec) -> None:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            tensor = self.ep.state_dict.get(spec.target)
            if tensor is None:
                tensor = self.ep.constants[spec.target]  # non-persistent buffer
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            tensor = self.ep.constants[spec.target]
        else:
            raise UnsupportedOpError(f"input kind {spec.kind.name} ({node.name}) is not supported",
                                     "export the model in eval mode without custom objects or token inputs")
        name = spec.target
        # Clone: tied weights share storage, which safetensors refuses to save.
        self.weights[name] = tensor.detach().clone().contiguous()
        self.values[name] = TensorSpec.of(self.weights[name])
        self.value_of[node] = [name]

    def _convert_call(self, node: torch.fx.Node) -> None:
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            self.symbolic[node] = self.dim(val)
            return
        if node.target is operator.getitem:
            source, index = node.args
            names = self.value_of[source]
            if index >= len(names) or names[index] is None:
                raise UnsupportedOpError(f"{source.target} output {index} is used, which ipexconvert does not model",
                                         "use only the primary output of this op")
            self.value_of[node] = [names[index]]
            return
        target = str(node.target)
        if target in _SKIPPED_TARGETS:
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise UnsupportedOpError(f"call to {target} is not an ATen op (at {_source_line(node) or 'unknown source'})",
                                     "rewrite that Python-level computation with tensor ops")
        args = self._bind_schema(node)
        mapper = ATEN_MAP.get(target)
        if mapper is not None:
            try:
                inputs, attrs = mapper.convert(target, args)
                attrs = {k: self._plain_attr(v) for k, v in attrs.items()}
                self._emit(node, mapper.op, [None if i is None else self._tensor_value(i) for i in inputs],
                           get_op(mapper.op).parse_attrs(attrs).model_dump(), primary_only=True)
                return
            except Unconvertible:
                pass
        reason = refusal_reason(target)
        if reason is not None:
            raise UnsupportedOpError(
                f"op {target} at {_source_line(node) or 'unknown source'} cannot be converted: {reason}",
                "replace it in the model with standard tensor ops, or open an issue asking for it in the opset")
        tensor_inputs: list[str] = []

        def tensor_index(fx_node: torch.fx.Node) -> int:
            tensor_inputs.append(self._tensor_value(fx_node))
            return len(tensor_inputs) - 1

        positional = [encode_arg(v, tensor_index, self.symbolic_of) for v in node.args]
        keywords = {k: encode_arg(v, tensor_index, self.symbolic_of) for k, v in node.kwargs.items()}
        self._emit(node, "aten", tensor_inputs, {"target": target, "args": positional, "kwargs": keywords}, primary_only=False)

    def _emit(self, node: torch.fx.Node, op: str, inputs: list[str | None], attrs: dict, primary_only: bool) -> None:
        val = node.meta["val"]
        fakes = list(val) if isinstance(val, (tuple, list)) else [val]
        if primary_only:
            fakes = fakes[:1]  # e.g. native_layer_norm's mean/rstd are not modelled
        outputs = []
        for i, fake in enumerate(fakes):
            if not isinstance(fake, torch.Tensor):
                outputs.append(None)
                continue
            name = node.name if len(fakes) == 1 else f"{node.name}_{i}"
            self.values[name] = self.spec(fake)
            outputs.append(name)
        self.value_of[node] = outputs
        self.nodes.append(Node(name=node.name, op=op, inputs=inputs, outputs=[o for o in outputs if o is not None],
                               attrs=attrs, source=_source_line(node)))

    def _outputs(self, node: torch.fx.Node) -> list[str]:
        specs = [s for s in self.ep.graph_signature.output_specs]
        names: list[str] = []
        for spec, arg in zip(specs, node.args[0]):
            if spec.kind != OutputKind.USER_OUTPUT:
                raise UnsupportedOpError(f"the model mutates state ({spec.kind.name})",
                                         "export an inference-only forward that does not update buffers")
            if not isinstance(arg, torch.fx.Node):
                raise UnsupportedOpError("the model returns a non-tensor output", "return only tensors from forward()")
            names.append(self._tensor_value(arg))
        return names


def _rename_outputs(program: Program, wanted: list[str] | None) -> None:
    """Give outputs readable names; outputs that are inputs/constants/duplicates get an identity node."""
    graph = program.graph
    n = len(graph.outputs)
    wanted = list(wanted) if wanted and len(wanted) == n else [f"output_{i}" if n > 1 else "output" for i in range(n)]
    producers = graph.producers()
    renamed: dict[str, str] = {}
    seen: set[str] = set()
    for i, (value, new) in enumerate(zip(graph.outputs, wanted)):
        if new in graph.values and new != value:
            new = f"{new}_out"
        if value not in producers or value in seen:
            graph.nodes.append(Node(name=f"output_copy_{i}", op="identity", inputs=[value], outputs=[new]))
            graph.values[new] = graph.values[renamed.get(value, value)]  # a duplicate's first use may be renamed already
        else:
            renamed[value] = new
            graph.values[new] = graph.values.pop(value)
        seen.add(value)
        graph.outputs[i] = new
    for node in graph.nodes:
        node.inputs = [renamed.get(i, i) if i is not None else None for i in node.inputs]
        node.outputs = [renamed.get(o, o) for o in node.outputs]


def program_from_module(module: torch.nn.Module, example_inputs: Mapping[str, torch.Tensor], dynamic: DynamicDims,
                        output_names: list[str] | None = None) -> Program:
    ep = decompose(export_module(module, example_inputs, dynamic))
    return program_from_exported(ep, dynamic, output_names)


def program_from_exported(ep: ExportedProgram, dynamic: DynamicDims | None = None,
                          output_names: list[str] | None = None) -> Program:
    return _Converter(ep, dynamic or {}, output_names).convert()
