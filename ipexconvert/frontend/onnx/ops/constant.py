"""Constant: its value attribute as a tensor (the interpreter folds it before tracing)."""
import torch

from ._registry import OnnxNode, Unconvertible, onnx_op

_FORMS = {
    "value": lambda v: v.tensor,  # a Const (ops/_registry.py reads tensor attributes so)
    "value_float": lambda v: torch.tensor(v, dtype=torch.float32),
    "value_floats": lambda v: torch.tensor(v, dtype=torch.float32),
    "value_int": lambda v: torch.tensor(v, dtype=torch.int64),
    "value_ints": lambda v: torch.tensor(v, dtype=torch.int64),
}


@onnx_op("Constant")
def constant(node: OnnxNode, inputs: list) -> torch.Tensor:
    for key, make in _FORMS.items():
        if key in node.attrs:
            return make(node.attr(key))
    raise Unconvertible(f"Constant with attribute(s) {', '.join(node.attrs) or 'none'}")
