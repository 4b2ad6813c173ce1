"""Ops that only move or relabel data: reshape, flatten, permute, kv_append (a Concat), identity, to_memory_format (ONNX
has no memory layout: an Identity, or a Cast with a dtype), to_dtype."""
from __future__ import annotations

from .. import builder as _builder
from ....ir import dtypes
from ._registry import emits

# bfloat16 parts of an artifact (an int8 artifact's float layers) are written as float32: ONNX Runtime's
# CPU provider has no bfloat16 kernels for most ops, and float32 holds every bfloat16 value.
_ONNX_TYPE = {"float32": 1, "uint8": 2, "int8": 3, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
              "float16": 10, "float64": 11, "bfloat16": 1}
_FLOAT32_LIKE = {"float32", "bfloat16"}


@emits("reshape")
def reshape(b, node) -> None:
    b.node("Reshape", [node.inputs[0], b.shape(node.attrs["shape"])], node.outputs)


@emits("flatten")
def flatten(b, node) -> None:
    b.node("Reshape", [node.inputs[0], b.shape(b.graph.values[node.outputs[0]].shape)], node.outputs)


@emits("permute")
def permute(b, node) -> None:
    b.node("Transpose", [node.inputs[0]], node.outputs, perm=list(node.attrs["perm"]))


@emits("kv_append")
def kv_append(b, node) -> None:
    if b.graph.values[node.inputs[0]].dtype == "int8":
        raise _builder.Unexportable("an int8 KV cache (its rows hold scales; convert without --kv-cache int8)")
    b.node("Concat", list(node.inputs), node.outputs, axis=2)  # ONNX has no in-place cache: the value is the cat


@emits("identity")
def identity(b, node) -> None:
    b.node("Identity", [node.inputs[0]], node.outputs)


def _cast(b, node, dtype) -> None:
    source = b.graph.values[node.inputs[0]].dtype
    if dtype is None or (dtype in _FLOAT32_LIKE and source in _FLOAT32_LIKE):
        b.node("Identity", [node.inputs[0]], node.outputs)  # bfloat16 <-> float32 is float32 in ONNX
    else:
        b.node("Cast", [node.inputs[0]], node.outputs, to=onnx_type(dtype))


@emits("to_memory_format")
def to_memory_format(b, node) -> None:
    _cast(b, node, node.attrs.get("dtype"))


@emits("to_dtype")
def to_dtype(b, node) -> None:
    _cast(b, node, node.attrs["dtype"])


def onnx_type(name: str) -> int:
    if name not in _ONNX_TYPE:
        raise _builder.Unexportable(f"dtype {name}")
    dtypes.to_torch(name)
    return _ONNX_TYPE[name]


def numpy_dtype(name: str) -> str:
    """The numpy dtype constants of an IR dtype are written in (bfloat16 as float32)."""
    return "float32" if name == "bfloat16" else name
