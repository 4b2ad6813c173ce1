"""OnnxBuilder: collects the ONNX nodes and initializers an artifact's graph becomes.

Emitters (emitters/) call `node`, `const` and `dim` with the IR's value names; the builder
keeps every ONNX name unique and turns the IR's named dynamic dims into runtime sizes read from
the graph input that carries each one (Shape -> Gather).
"""
from __future__ import annotations

from functools import cached_property
from typing import Any, Optional, Sequence

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from ...errors import UnsupportedOpError
from ...ir import Graph


class Unexportable(Exception):
    """A node whose attributes or inputs the emitter does not cover."""


class OnnxBuilder:
    def __init__(self, graph: Graph, weights: dict[str, torch.Tensor]):
        self.graph = graph
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._taken: set[str] = set(graph.values)
        self._dim_source: dict[str, tuple[str, int]] = {}
        for name in graph.inputs:
            for axis, d in enumerate(graph.values[name].shape):
                if isinstance(d, str) and d not in self._dim_source:
                    self._dim_source[d] = (name, axis)
        self._dims: dict[str, str] = {}
        # int8 artifacts: layer -> (scale, zero point, dtype) of its calibrated output (the plan's LayerPlan.output)
        self.output_ranges: dict[str, tuple[float, int, str]] = {}

    @cached_property
    def users(self) -> dict:
        """The IR graph's readers of each value (once: emitters do not change the IR)."""
        return self.graph.users()

    @cached_property
    def producers(self) -> dict:
        return self.graph.producers()

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self._taken:
            i += 1
            name = f"{base}_{i}"
        self._taken.add(name)
        return name

    def node(self, op_type: str, inputs: Sequence[Optional[str]], outputs: Optional[Sequence[str]] = None,
             **attrs: Any) -> list[str]:
        """Append one node; outputs default to one fresh name."""
        outs = list(outputs) if outputs is not None else [self.fresh(op_type.lower())]
        self.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outs,
                                           name=self.fresh(f"n_{op_type}"), **attrs))
        return outs

    def const(self, value, base: str = "c", dtype=None) -> str:
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value, dtype=dtype)
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))  # keeps 0-d as 0-d
        return name

    def weight(self, value: str) -> torch.Tensor:
        return self.weights[value]

    def dim(self, entry) -> str:
        """An int64 [1] tensor holding one size of the IR: a number, or a dynamic dim read off the input
        that carries it. Expressions over dims (batch*seq) are not exported yet."""
        if isinstance(entry, int):
            return self.const(np.array([entry], dtype=np.int64), "size")
        if entry not in self._dim_source:
            raise Unexportable(f"the size {entry!r} (only plain dynamic dims that an input carries are exported)")
        if entry not in self._dims:
            source, axis = self._dim_source[entry]
            shape = self.node("Shape", [source])[0]
            self._dims[entry] = self.node("Gather", [shape, self.const(np.array([axis], dtype=np.int64), "axis")],
                                          axis=0)[0]
        return self._dims[entry]

    def shape(self, entries: Sequence) -> str:
        """An int64 [rank] shape tensor from IR shape entries (static ones as one constant)."""
        if all(isinstance(e, int) for e in entries):
            return self.const(np.array(list(entries), dtype=np.int64), "shape")
        return self.node("Concat", [self.dim(e) for e in entries], axis=0)[0]


def unsupported(problems: dict[str, int]) -> UnsupportedOpError:
    listed = ", ".join(f"{k} (x{n})" if n > 1 else k for k, n in sorted(problems.items()))
    return UnsupportedOpError(f"the artifact holds ops ipexconvert cannot export to ONNX yet: {listed}",
                              "see docs/onnx.md for what export covers; keep the original model for those")
