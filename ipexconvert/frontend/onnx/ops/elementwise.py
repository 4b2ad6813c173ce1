"""Elementwise ops: the table of unary and binary ONNX ops that are one torch function each, plus
the ones with attributes. Binary ops broadcast as numpy does (ONNX's rule, torch's too); on Ints
(shape arithmetic) they compute in Python so sizes stay symbolic."""
from __future__ import annotations

import operator
from typing import Callable, Optional, Union

import torch
import torch.nn.functional as F

from ..values import Const, Ints, broadcast_ints, tensor
from ._registry import OnnxNode, onnx_op

UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "Abs": torch.abs, "Neg": torch.neg, "Exp": torch.exp, "Log": torch.log, "Sqrt": torch.sqrt,
    "Reciprocal": torch.reciprocal, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Relu": torch.relu,
    "Erf": torch.erf, "Floor": torch.floor, "Ceil": torch.ceil, "Round": torch.round,  # half to even, as ONNX
    "Sign": torch.sign, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan, "Asin": torch.asin,
    "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh, "Cosh": torch.cosh, "Asinh": torch.asinh,
    "Acosh": torch.acosh, "Atanh": torch.atanh, "Softsign": F.softsign, "IsNaN": torch.isnan,
    "Not": torch.logical_not, "BitwiseNot": torch.bitwise_not, "Mish": F.mish, "HardSwish": F.hardswish,
    "Identity": lambda x: x,
}

BINARY: dict[str, Callable] = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul,
    "Equal": torch.eq, "Greater": torch.gt, "Less": torch.lt, "GreaterOrEqual": torch.ge, "LessOrEqual": torch.le,
    "And": torch.logical_and, "Or": torch.logical_or, "Xor": torch.logical_xor,
    "BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or, "BitwiseXor": torch.bitwise_xor,
}

# The same ops on Python ints / SymInts (shape arithmetic).
_ON_INTS: dict[str, Callable] = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul,
    "Div": lambda a, b: a // b if not (isinstance(a, int) and isinstance(b, int)) else int(a / b),
    "Equal": lambda a, b: a == b, "Greater": lambda a, b: a > b, "Less": lambda a, b: a < b,
    "GreaterOrEqual": lambda a, b: a >= b, "LessOrEqual": lambda a, b: a <= b,
    "And": lambda a, b: bool(a and b), "Or": lambda a, b: bool(a or b), "Xor": lambda a, b: bool(a) != bool(b),
    "Mod": lambda a, b: a % b, "Max": max, "Min": min,
}
_BOOL_RESULT = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor"}
_UNARY_ON_INTS: dict[str, Callable] = {"Not": lambda a: not a, "Neg": operator.neg, "Abs": abs, "Identity": lambda a: a}


def _all_ints(inputs: list) -> bool:
    return all(isinstance(v, Ints) for v in inputs) and len({v.dtype for v in inputs}) == 1


def _on_ints(op_type: str, inputs: list) -> Ints:
    columns = broadcast_ints(inputs)
    fn = _ON_INTS[op_type]
    values = []
    for row in zip(*columns):
        acc = row[0]
        for x in row[1:]:
            acc = fn(acc, x)
        values.append(acc)
    dtype = torch.bool if op_type in _BOOL_RESULT else inputs[0].dtype
    return Ints(values, max(v.rank for v in inputs), dtype)


def _unary(name, fn):
    def run(node: OnnxNode, inputs: list):
        x = inputs[0]
        if name in _UNARY_ON_INTS and isinstance(x, Ints):
            return Ints([_UNARY_ON_INTS[name](v) for v in x.values], x.rank, x.dtype)
        return fn(tensor(x))
    return run


for _name, _fn in UNARY.items():
    onnx_op(_name)(_unary(_name, _fn))


def _number(v, other) -> Optional[Union[int, float]]:
    """A one-element constant operand as a Python number, where that changes nothing: same dtype as the
    tensor it meets and no more dims (so no broadcast grows the result). The IR then holds `x * 0.5`
    as a scalar attribute, which the passes recognise (GELU, attention scales, RMSNorm)."""
    if not isinstance(v, Const) or len(v.numbers) != 1 or not isinstance(other, torch.Tensor):
        return None
    if v.tensor.dtype != other.dtype or v.tensor.dim() > other.dim() or v.tensor.dtype == torch.bool:
        return None
    return v.numbers[0]


def _operands(inputs: list, commutative: bool):
    """(a, b) for fn(a, b): a scalar constant on the right becomes a number; on the left too where
    the op commutes (swapped)."""
    a, b = inputs
    rhs = _number(b, a)
    if rhs is not None:
        return tensor(a), rhs
    lhs = _number(a, b) if commutative else None
    if lhs is not None:
        return tensor(b), lhs
    return tensor(a), tensor(b)


_COMMUTATIVE = {"Add", "Mul"}


def _binary(name, fn):
    def run(node: OnnxNode, inputs: list):
        if name in _ON_INTS and _all_ints(inputs):
            return _on_ints(name, inputs)
        if name in ("Add", "Sub", "Mul"):
            return fn(*_operands(inputs, name in _COMMUTATIVE))
        return fn(tensor(inputs[0]), tensor(inputs[1]))
    return run


for _name, _fn in BINARY.items():
    onnx_op(_name)(_binary(_name, _fn))


@onnx_op("Div")
def div(node: OnnxNode, inputs: list):
    if _all_ints(inputs):
        return _on_ints("Div", inputs)
    a, b = _operands(inputs, commutative=False)
    if a.is_floating_point():
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")  # integer Div truncates toward zero


@onnx_op("Pow")
def pow_(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    y = _number(inputs[1], x)
    y = tensor(inputs[1]) if y is None else y
    return torch.pow(x, y).to(x.dtype)  # ONNX: the result has the base's type


@onnx_op("Mod")
def mod(node: OnnxNode, inputs: list):
    if not node.attr("fmod", 0) and _all_ints(inputs):
        return _on_ints("Mod", inputs)
    a, b = tensor(inputs[0]), tensor(inputs[1])
    return torch.fmod(a, b) if node.attr("fmod", 0) else torch.remainder(a, b)


def _variadic(name, fn):
    def run(node: OnnxNode, inputs: list):
        if name in _ON_INTS and _all_ints(inputs):
            return _on_ints(name, inputs)
        acc = tensor(inputs[0])
        for x in inputs[1:]:
            acc = fn(acc, tensor(x))
        return acc / len(inputs) if name == "Mean" else acc
    return run


for _name, _fn in {"Max": torch.maximum, "Min": torch.minimum, "Sum": torch.add, "Mean": torch.add}.items():
    onnx_op(_name)(_variadic(_name, _fn))


@onnx_op("Where")
def where(node: OnnxNode, inputs: list):
    cond, a, b = inputs
    if all(isinstance(v, Ints) for v in inputs):
        c, x, y = broadcast_ints(inputs)
        return Ints([xi if ci else yi for ci, xi, yi in zip(c, x, y)], max(v.rank for v in inputs), a.dtype)
    return torch.where(tensor(cond), tensor(a), tensor(b))


@onnx_op("LeakyRelu")
def leaky_relu(node: OnnxNode, inputs: list):
    return F.leaky_relu(tensor(inputs[0]), node.attr("alpha", 0.01))


@onnx_op("Elu")
def elu(node: OnnxNode, inputs: list):
    return F.elu(tensor(inputs[0]), node.attr("alpha", 1.0))


@onnx_op("Celu")
def celu(node: OnnxNode, inputs: list):
    return F.celu(tensor(inputs[0]), node.attr("alpha", 1.0))


@onnx_op("Selu")
def selu(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    alpha, gamma = node.attr("alpha", 1.67326319217681884765625), node.attr("gamma", 1.05070102214813232421875)
    return gamma * torch.where(x > 0, x, alpha * (torch.exp(x) - 1))


@onnx_op("HardSigmoid")
def hard_sigmoid(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    return torch.clamp(node.attr("alpha", 0.2) * x + node.attr("beta", 0.5), 0, 1)


@onnx_op("ThresholdedRelu")
def thresholded_relu(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    return torch.where(x > node.attr("alpha", 1.0), x, torch.zeros_like(x))


@onnx_op("Softplus")
def softplus(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))  # ONNX: log(exp(x) + 1), without overflow


@onnx_op("Gelu")
def gelu(node: OnnxNode, inputs: list):
    return F.gelu(tensor(inputs[0]), approximate=node.attr("approximate", "none"))


@onnx_op("Swish")
def swish(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    alpha = node.attr("alpha", 1.0)
    return F.silu(x) if alpha == 1.0 else x * torch.sigmoid(alpha * x)


@onnx_op("PRelu")
def prelu(node: OnnxNode, inputs: list):
    x, slope = tensor(inputs[0]), tensor(inputs[1])
    return torch.where(x >= 0, x, x * slope)


@onnx_op("Shrink")
def shrink(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    zero = torch.zeros_like(x)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero))


@onnx_op("IsInf")
def is_inf(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if pos and neg:
        return torch.isinf(x)
    if pos:
        return torch.isposinf(x)
    if neg:
        return torch.isneginf(x)
    return torch.zeros_like(x, dtype=torch.bool)


@onnx_op("Clip")
def clip(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    lo = tensor(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
    hi = tensor(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    if lo is not None and hi is not None:
        return torch.minimum(torch.maximum(x, lo), hi)  # ONNX: min(max(x, lo), hi), also when lo > hi
    if lo is not None:
        return torch.maximum(x, lo)
    if hi is not None:
        return torch.minimum(x, hi)
    return x
