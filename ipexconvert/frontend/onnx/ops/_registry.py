"""The ONNX op table: one entry per ONNX op type (default domain), each a function that computes the
op with torch functions on the interpreter's values (frontend/onnx/values.py).

The interpreter (frontend/onnx/module.py) runs these under torch.export, so each entry becomes the
ATen calls the torch frontend already maps onto the IR: ONNX ops are never stored in an artifact,
and an op type without an entry here is refused before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import onnx
from onnx import helper


class Unconvertible(Exception):
    """This node's attributes or inputs fall outside what the entry implements (the import stops with it)."""


@dataclass
class OnnxNode:
    """What an entry sees of one node: its attributes (plain Python values), type, name and opset.

    Entries read attributes through `attr`, which records the names read: an attribute the entry
    never looked at (one a newer opset added, say) would be silently ignored, so the interpreter
    refuses the node instead (`unread`)."""

    op_type: str
    name: str
    attrs: dict[str, Any]
    opset: int
    n_outputs: int
    read: set = field(default_factory=set)

    @classmethod
    def of(cls, node: onnx.NodeProto, opset: int) -> "OnnxNode":
        attrs = {a.name: _attr_value(a) for a in node.attribute}
        return cls(node.op_type, node.name or node.op_type, attrs, opset, len(node.output))

    def attr(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        return self.attrs.get(name, default)

    def unread(self) -> list[str]:
        return sorted(set(self.attrs) - self.read)


def _attr_value(a: onnx.AttributeProto) -> Any:
    if a.type == onnx.AttributeProto.TENSOR:  # read now, outside tracing: its numbers stay readable
        from .. import tensors
        from ..values import Const
        return Const.of(tensors.to_torch(a.t))
    if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
        raise Unconvertible(f"attribute {a.name} holds a subgraph (control flow is not supported)")
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in value]
    return value


OpFn = Callable[[OnnxNode, list], Any]  # (node, inputs: values or None for omitted ones) -> value or list of values


@dataclass(frozen=True)
class OnnxOp:
    op_type: str
    run: OpFn
    min_opset: int = 13  # semantics of this opset and newer (older versions differ in attributes)


ONNX_OPS: dict[str, OnnxOp] = {}


def onnx_op(*op_types: str, min_opset: int = 13) -> Callable[[OpFn], OpFn]:
    """Register the decorated function for each op type."""

    def register(run: OpFn) -> OpFn:
        for op_type in op_types:
            if op_type in ONNX_OPS:
                raise RuntimeError(f"ONNX op {op_type} is registered twice")
            ONNX_OPS[op_type] = OnnxOp(op_type, run, min_opset)
        return run

    return register


def lookup(op_type: str) -> Optional[OnnxOp]:
    return ONNX_OPS.get(op_type)
