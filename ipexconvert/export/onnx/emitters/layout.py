"""Ops that only move or relabel data: reshape, flatten, permute, identity, to_memory_format (ONNX
has no memory layout: an Identity, or a Cast with a dtype), to_dtype."""
from __future__ import annotations

from .. import builder as _builder
from ....ir import dtypes
from ._registry import emits

_ONNX_TYPE = {"float32": 1, "uint8": 2, "int8": 3, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
              "float16": 10, "float64": 11, "bfloat16": 16}


@emits("reshape")
def reshape(b, node) -> None:
    b.node("Reshape", [node.inputs[0], b.shape(node.attrs["shape"])], node.outputs)


@emits("flatten")
def flatten(b, node) -> None:
    b.node("Reshape", [node.inputs[0], b.shape(b.graph.values[node.outputs[0]].shape)], node.outputs)


@emits("permute")
def permute(b, node) -> None:
    b.node("Transpose", [node.inputs[0]], node.outputs, perm=list(node.attrs["perm"]))


@emits("identity")
def identity(b, node) -> None:
    b.node("Identity", [node.inputs[0]], node.outputs)


@emits("to_memory_format")
def to_memory_format(b, node) -> None:
    dtype = node.attrs.get("dtype")
    if dtype is None:
        b.node("Identity", [node.inputs[0]], node.outputs)
    else:
        b.node("Cast", [node.inputs[0]], node.outputs, to=_ONNX_TYPE[dtype])


@emits("to_dtype")
def to_dtype(b, node) -> None:
    b.node("Cast", [node.inputs[0]], node.outputs, to=_ONNX_TYPE[node.attrs["dtype"]])


def onnx_type(name: str) -> int:
    if name not in _ONNX_TYPE:
        raise _builder.Unexportable(f"dtype {name}")
    dtypes.to_torch(name)
    return _ONNX_TYPE[name]
