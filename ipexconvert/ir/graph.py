"""The IR: a flat, topologically ordered list of nodes over named values.

A Graph is pure data (pydantic, serialised into the artifact as JSON); the weights
live next to it in a Program so passes can rewrite both together.
"""
from __future__ import annotations

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
    _next_id: int = field(default=0, repr=False)  # a plain int: programs are deep-copied (itertools.count warns on Python 3.12)

    def fresh_name(self, base: str) -> str:
        taken = self.graph.values
        while True:
            name = f"{base}_{self._next_id}"
            self._next_id += 1
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


# ---- load-time validation -------------------------------------------------------------------------------
# An artifact's graph is untrusted: its hashes prove only that nobody edited it without re-hashing.
# The executor and kernels assume what check_graph establishes, so a hostile graph is refused with a
# clear error instead of reaching a kernel (index errors, reads of values not yet computed, ...).

_RECREATE = "re-create the artifact with `ipexconvert optimize`; this graph was not written by it or was edited"
_UPGRADE = "if a newer ipexconvert wrote this artifact, upgrade; otherwise re-create it with `ipexconvert optimize`"


def check_graph(graph: Graph) -> None:
    """Raise ArtifactError for the first inconsistency: a name without a spec, a dtype that is not one,
    a node reading a value that is neither an input, a constant nor the output of an EARLIER node
    (reversed order, cycles, dangling names), a value produced twice, an op outside the opset, attrs its
    op's Attrs model refuses, an attr naming an input index the node does not have, a missing output,
    a dynamic dim no input binds or an expression naming something that is not a dynamic dim.

    Structure only: whether each node fits its op (arity, shape rule, post-op operands, output budget) is
    ir/validate.py: check_nodes, which the loader runs next, once the constants' tensors are known to be
    what their specs say."""
    from ..errors import ArtifactError
    from . import dtypes
    from .opdef import get_op

    def fail(problem: str, fix: str = _RECREATE):
        raise ArtifactError(f"the graph is inconsistent: {problem}", fix)

    for name, rng in graph.dims.items():
        if not 0 <= rng.min <= rng.max:
            fail(f"dynamic dim {name} has the range {rng.min}..{rng.max}")
    for name, spec in graph.values.items():
        try:
            dtypes.to_torch(spec.dtype)
        except ValueError as e:
            fail(f"value {name}: {e}")
        if any(isinstance(d, int) and d < 0 for d in spec.shape):
            fail(f"value {name} has a negative size in its shape {spec.shape}")
        if spec.memory_format == "channels_last" and spec.rank != 4:
            fail(f"value {name} is channels_last with {spec.rank} dims (channels_last is for 4-D tensors)")
    for kind, names in (("input", graph.inputs), ("constant", graph.constants), ("output", graph.outputs)):
        for name in names:
            if name not in graph.values:
                fail(f"graph {kind} {name} has no value spec")
    for kind, names in (("inputs", graph.inputs), ("constants", graph.constants)):
        if len(set(names)) != len(names):
            fail(f"graph {kind} name a value twice")
    both = set(graph.inputs) & set(graph.constants)
    if both:
        fail(f"{sorted(both)[0]} is both a graph input and a constant")
    for name in graph.constants:
        if not all(isinstance(d, int) for d in graph.values[name].shape):
            fail(f"constant {name} has a symbolic shape {graph.values[name].shape}")

    # Dims are bound at run time from the inputs' shapes: each must be one input axis, and every
    # expression may name only these (an unbound name would fail inside a kernel at run time).
    bare = {d for name in graph.inputs for d in graph.values[name].shape if isinstance(d, str)}
    for name in graph.dims:
        if name not in bare:
            fail(f"dynamic dim {name} is not the size of any input axis, so nothing binds it at run time")
    for name, spec in graph.values.items():
        unbound = _names(spec.shape) - set(graph.dims)
        if unbound:
            fail(f"value {name} has the shape {spec.shape}, which names {', '.join(sorted(unbound))}, not a dynamic dim")

    defined = set(graph.inputs) | set(graph.constants)
    node_names: set[str] = set()
    for node in graph.nodes:
        where = f"node {node.name} ({node.op})"
        if node.name in node_names:
            fail(f"two nodes are named {node.name}")
        node_names.add(node.name)
        try:
            attrs = get_op(node.op).parse_attrs(node.attrs)
        except (KeyError, ValueError) as e:  # unknown op; pydantic's ValidationError is a ValueError
            detail = " ".join(str(e.args[0] if isinstance(e, KeyError) else e).split())
            raise ArtifactError(f"{where} cannot be run: {detail}", _UPGRADE) from None
        if get_op(node.op).made_at_load(attrs):
            fail(f"{where} is made by the runtime at load and never stored in an artifact")
        for value in node.inputs:
            if value is not None and value not in defined:
                later = any(value in n.outputs for n in graph.nodes)
                fail(f"{where} reads {value}, which " + ("is computed only by a later node (nodes must be in "
                     "topological order)" if later else "no input, constant or node provides"))
        try:
            unbound = _names(attr_expressions(attrs)) - set(graph.dims)
        except ValueError as e:  # an aten `$sym` argument outside the dims grammar
            fail(f"{where} attrs: {e}")
        if unbound:
            fail(f"{where} attrs name {', '.join(sorted(unbound))}, not a dynamic dim")
        for index in _input_indices(attrs):
            if type(index) is not int or not 0 <= index < len(node.inputs) or node.inputs[index] is None:
                fail(f"{where} attrs refer to input {index!r}, but the node has inputs {node.inputs}")
        for value in node.outputs:
            if value in defined:
                fail(f"{where} writes {value}, which is already an input, a constant or another node's output")
            if value not in graph.values:
                fail(f"{where} output {value} has no value spec")
            defined.add(value)
    for name in graph.outputs:
        if name not in defined:
            fail(f"graph output {name} is not computed by any node")


def _input_indices(attrs: Any) -> list[Any]:
    """Indices into node.inputs that attrs refer to: binary post-op operands and aten `$in` arguments."""
    from .postops import PostOp

    found: list[Any] = []
    stack = [attrs]
    while stack:
        item = stack.pop()
        if isinstance(item, PostOp):
            if item.operand is not None:
                found.append(item.operand)
        elif isinstance(item, BaseModel):
            stack.extend(getattr(item, field) for field in type(item).model_fields)
        elif isinstance(item, dict):
            if set(item) == {"$in"}:
                found.append(item["$in"])
            else:
                stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def _names(entries) -> set[str]:
    """Dim names the string entries (expressions in the dims grammar, checked when parsed) refer to."""
    from .dim_expr import parse

    return set().union(*(parse(e).names() for e in entries if isinstance(e, str)))


def attr_expressions(attrs: Any) -> list[str]:
    """Dim expressions in attrs: entries of shape-like fields (list[DimEntry]) and aten `$sym` arguments."""
    from .dims import DimEntry

    found: list[str] = []
    stack = [attrs]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseModel):
            for field, info in type(item).model_fields.items():
                value = getattr(item, field)
                if info.annotation == list[DimEntry]:
                    found.extend(d for d in value if isinstance(d, str))
                else:
                    stack.append(value)
        elif isinstance(item, dict):
            if set(item) == {"$sym"}:
                found.append(item["$sym"])
            else:
                stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found
