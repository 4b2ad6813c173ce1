"""The IR: a flat, topologically ordered list of nodes over named values.

A Graph is pure data (pydantic, serialised into the artifact as JSON); the weights
live next to it in a Program so passes can rewrite both together.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field

from .spec import DimRange, TensorSpec


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    op: str = Field(description="opset name, or 'aten' for a core-ATen fallback")
    inputs: list[Optional[str]] = Field(description="value names; None for an omitted optional input")
    outputs: list[str]
    attrs: dict[str, Any] = Field(default_factory=dict)
    source: Optional[str] = Field(default=None, description="model source line this node came from")


class Graph(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: list[str]
    outputs: list[str]
    nodes: list[Node]
    values: dict[str, TensorSpec] = Field(description="spec of every value: inputs, constants, node outputs")
    constants: list[str] = Field(default_factory=list, description="values stored as tensors in the artifact")
    dims: dict[str, DimRange] = Field(default_factory=dict, description="named dynamic dims and their ranges")

    # ---- queries -------------------------------------------------------
    def producers(self) -> dict[str, Node]:
        return {out: n for n in self.nodes for out in n.outputs}

    def users(self) -> dict[str, list[Node]]:
        table: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i is not None:
                    table.setdefault(i, []).append(n)
        return table

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for n in self.nodes:
            key = f"aten:{n.attrs.get('target')}" if n.op == "aten" else n.op
            hist[key] = hist.get(key, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass
class Program:
    """A graph plus the tensors its constants name."""

    graph: Graph
    weights: dict[str, torch.Tensor] = field(default_factory=dict)
    _counter: itertools.count = field(default_factory=lambda: itertools.count(), repr=False)

    def fresh_name(self, base: str) -> str:
        taken = self.graph.values
        while True:
            name = f"{base}_{next(self._counter)}"
            if name not in taken and name not in self.weights:
                return name

    def add_constant(self, base: str, tensor: torch.Tensor) -> str:
        name = self.fresh_name(base)
        self.weights[name] = tensor
        self.graph.values[name] = TensorSpec.of(tensor)
        self.graph.constants.append(name)
        return name

    def set_constant(self, name: str, tensor: torch.Tensor) -> None:
        self.weights[name] = tensor
        self.graph.values[name] = TensorSpec.of(tensor)

    def is_constant(self, value: Optional[str]) -> bool:
        return value is not None and value in self.weights

    def prune(self) -> None:
        """Drop value specs and constants no node, input or output refers to any more."""
        used = set(self.graph.inputs) | set(self.graph.outputs)
        for n in self.graph.nodes:
            used.update(i for i in n.inputs if i is not None)
            used.update(n.outputs)
        self.graph.values = {k: v for k, v in self.graph.values.items() if k in used}
        self.graph.constants = [c for c in self.graph.constants if c in used]
        self.weights = {k: v for k, v in self.weights.items() if k in used}
