"""OnnxGraphModule: an ONNX graph as a torch module that runs each node through its ONNX_OPS entry.

It is what torch.export traces (so the IR sees only ATen calls) and, without ONNX Runtime, the eager
oracle. Weights are buffers; small constants stay Python-side values (values.py) so shapes,
axes and pads computed from them are known while tracing.
"""
from __future__ import annotations

import inspect
import re

import onnx
import torch

from ...errors import UnsupportedOpError
from . import tensors
from .ops import ONNX_OPS, OnnxNode, Unconvertible
from .qdq_pairs import pair_fake_quantize
from .values import Ints, Value, constant_value, tensor


class OnnxGraphModule(torch.nn.Module):
    def __init__(self, model: onnx.ModelProto, opset: int):
        super().__init__()
        graph = model.graph
        self._constants: dict[str, Value] = {}
        self._buffer_of: dict[str, str] = {}
        for init in graph.initializer:
            self._add_constant(init.name, _read(init, f"initializer {init.name}"))
        for sparse in graph.sparse_initializer:
            raise UnsupportedOpError(f"sparse initializer {sparse.values.name}", "store the weights densely")
        known = {i.name for i in graph.initializer}
        self.onnx_inputs = [i for i in graph.input if i.name not in known]
        # Python-identifier names for the inputs and outputs (what the artifact and its callers use).
        self.input_names = unique_identifiers([i.name for i in self.onnx_inputs])
        self._onnx_name = {py: i.name for py, i in zip(self.input_names, self.onnx_inputs)}
        self.onnx_output_names = [o.name for o in graph.output]
        self.output_names = unique_identifiers(self.onnx_output_names)
        self._nodes = []
        for node in graph.node:
            try:
                view = OnnxNode.of(node, opset)
            except Unconvertible as e:
                raise _unsupported(node, str(e)) from None
            if node.op_type == "Constant":  # fold now: its numbers may be shapes or axes
                try:
                    self._add_constant(node.output[0], ONNX_OPS["Constant"].run(view, []))
                except Unconvertible as e:
                    raise _unsupported(node, str(e)) from None
                continue
            self._nodes.append((view, ONNX_OPS[node.op_type].run, list(node.input), list(node.output), node))
        self._nodes = pair_fake_quantize(self._nodes, self._constants, self.onnx_output_names, opset)

        self._set_signature()

    def _set_signature(self) -> None:
        """torch.export binds inputs by forward()'s parameter names: give this instance's forward one
        keyword parameter per graph input (a signature object, no generated code)."""
        run = self._run

        def forward(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            return run(**bound.arguments)

        signature = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                       for n in self.input_names])
        forward.__signature__ = signature
        self.forward = forward

    def _add_constant(self, name: str, t: torch.Tensor) -> None:
        def as_buffer(weight: torch.Tensor) -> torch.Tensor:
            attr = f"w{len(self._buffer_of)}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)[:60]
            self.register_buffer(attr, weight)
            self._buffer_of[name] = attr
            return weight

        self._constants[name] = constant_value(t, as_buffer)

    def _run(self, **inputs: torch.Tensor):
        env: dict[str, Value] = dict(self._constants)
        for name, attr in self._buffer_of.items():
            env[name] = getattr(self, attr)
        env.update({self._onnx_name[k]: v for k, v in inputs.items()})
        for view, run, in_names, out_names, proto in self._nodes:
            args = [env[n] if n else None for n in in_names]
            try:
                result = run(view, args)
                if view.unread():
                    raise Unconvertible(f"attribute(s) {', '.join(view.unread())} (the importer does not implement them)")
            except Unconvertible as e:
                raise _unsupported(proto, str(e)) from None
            results = result if isinstance(result, (list, tuple)) else [result]
            for name, value in zip(out_names, results):
                if name:
                    env[name] = value
        return tuple(_as_output(env[n]) for n in self.onnx_output_names)


def unique_identifiers(names: list[str]) -> list[str]:
    """`input.1` -> `input_1`, `0` -> `v_0`; clashes get a suffix."""
    out: list[str] = []
    for name in names:
        ident = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
        ident = f"v_{ident}" if ident[0].isdigit() else ident
        base, n = ident, 1
        while ident in out:
            ident, n = f"{base}_{n}", n + 1
        out.append(ident)
    return out


def _as_output(v: Value) -> torch.Tensor:
    t = tensor(v)
    return t.clone() if isinstance(v, Ints) or not isinstance(v, torch.Tensor) else t


def _read(proto: onnx.TensorProto, what: str) -> torch.Tensor:
    try:
        return tensors.to_torch(proto)
    except Unconvertible as e:
        raise UnsupportedOpError(f"{what}: {e}", "convert the model's tensors to a supported element type") from None


def _unsupported(node: onnx.NodeProto, why: str) -> UnsupportedOpError:
    label = f"{node.op_type} node {node.name!r}" if node.name else f"{node.op_type} node"
    return UnsupportedOpError(f"cannot import {label}: {why}",
                              "see docs/onnx.md for what each supported op covers; export the model without it")
