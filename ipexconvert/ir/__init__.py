"""Intermediate representation: specs, graph, opset."""
from . import ops  # noqa: F401  (registers the opset)
from .graph import Graph, Node, Program
from .opdef import OPSET, OpDef, get_op, register_op
from .spec import DimRange, TensorSpec

__all__ = ["Graph", "Node", "Program", "OPSET", "OpDef", "get_op", "register_op", "TensorSpec", "DimRange"]
