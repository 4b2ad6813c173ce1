"""`aten` fallback nodes: the allow-listed targets that ONNX-exportable models carry, one small
function per target in ATEN_EMITTERS (arguments decoded as ir/ops/aten.py stores them: {"$in": i}
for a node input, {"$sym": dim} for a dynamic size, numbers as they are)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..builder import OnnxBuilder, Unexportable
from ._registry import emits
from .layout import numpy_dtype

AtenFn = Callable[[OnnxBuilder, Any, list, dict], None]
ATEN_EMITTERS: dict[str, AtenFn] = {}


def aten(*targets: str):
    def register(fn: AtenFn) -> AtenFn:
        for t in targets:
            ATEN_EMITTERS[t] = fn
        return fn
    return register


def _tensor(node, value) -> str:
    if isinstance(value, dict) and "$in" in value:
        return node.inputs[value["$in"]]
    raise Unexportable(f"argument {value!r} where a tensor is expected")


def _int64(b: OnnxBuilder, value) -> str:
    """An int64 [1] tensor: a number, or a dynamic dim ({"$sym": name})."""
    if isinstance(value, dict) and "$sym" in value:
        return b.dim(value["$sym"])
    if isinstance(value, int) and not isinstance(value, bool):
        return b.const(np.array([value], dtype=np.int64), "i")
    raise Unexportable(f"argument {value!r} where an integer is expected")


def _number_like(b: OnnxBuilder, node, value, like: str) -> str:
    if isinstance(value, dict):
        if "$float" in value:
            value = float(value["$float"])
        else:
            raise Unexportable(f"argument {value!r} where a number is expected")
    return b.const(np.array(value, dtype=numpy_dtype(b.graph.values[like].dtype)), "k")


def _out(node) -> list[str]:
    return list(node.outputs)


@emits("aten")
def aten_node(b: OnnxBuilder, node) -> None:
    target = node.attrs["target"]
    fn = ATEN_EMITTERS.get(target)
    if fn is None:
        raise Unexportable(f"ATen op {target}")
    fn(b, node, node.attrs.get("args", []), node.attrs.get("kwargs", {}))


def supported(target: str) -> bool:
    return target in ATEN_EMITTERS


@aten("aten.unsqueeze.default")
def unsqueeze(b, node, args, kwargs):
    b.node("Unsqueeze", [_tensor(node, args[0]), b.const(np.array([args[1]], dtype=np.int64), "axes")], _out(node))


def _slice_params(node) -> tuple[int, Any, Any, Any]:
    args = node.attrs.get("args", [])
    dim = args[1] if len(args) > 1 else 0
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 and args[3] is not None else 2**63 - 1
    step = args[4] if len(args) > 4 else 1
    return dim, start, end, step


def _is_slice(node) -> bool:
    return node is not None and node.op == "aten" and node.attrs.get("target") == "aten.slice.Tensor"


def _absorbed(b: OnnxBuilder, node) -> bool:
    """A slice read only by a slice along another dim (a 2-D subsampling, e.g. a merged shortcut
    conv's x[:, :, ::2, ::2]): that one writes both as one Slice, one pass over the data."""
    readers = b.users.get(node.outputs[0], [])
    return (len(readers) == 1 and _is_slice(readers[0]) and node.outputs[0] not in b.graph.outputs
            and readers[0].inputs[0] == node.outputs[0] and _slice_params(readers[0])[0] != _slice_params(node)[0])


@aten("aten.slice.Tensor")
def slice_(b, node, args, kwargs):
    if _absorbed(b, node):
        return  # written by its reader
    parts = [_slice_params(node)]
    x = _tensor(node, args[0])
    first = b.producers.get(x)
    if _is_slice(first) and _absorbed(b, first):
        parts.insert(0, _slice_params(first))
        x = first.inputs[0]
    ints = [[_int64(b, p[i]) for p in parts] for i in (1, 2, 3)]
    starts, ends, steps = (v[0] if len(v) == 1 else b.node("Concat", v, axis=0)[0] for v in ints)
    axes = b.const(np.array([p[0] for p in parts], dtype=np.int64), "axes")
    b.node("Slice", [x, starts, ends, axes, steps], _out(node))


@aten("aten.expand.default")
def expand(b, node, args, kwargs):
    x = _tensor(node, args[0])
    out_shape = b.graph.values[node.outputs[0]].shape  # -1 entries resolved by the IR's shape rule
    b.node("Expand", [x, b.shape(out_shape)], _out(node))


@aten("aten.arange.start_step", "aten.arange.start", "aten.arange.default")
def arange(b, node, args, kwargs):
    if node.attrs["target"] == "aten.arange.default":
        start, end, step = 0, args[0], 1
    else:
        start, end, step = args[0], args[1], (args[2] if len(args) > 2 else 1)
    if b.graph.values[node.outputs[0]].dtype != "int64":
        raise Unexportable("a float arange")
    scalars = [b.node("Squeeze", [_int64(b, v)])[0] for v in (start, end, step)]
    b.node("Range", scalars, _out(node))


@aten("aten.gather.default")
def gather(b, node, args, kwargs):
    b.node("GatherElements", [_tensor(node, args[0]), _tensor(node, args[2])], _out(node), axis=args[1])


@aten("aten.select.int")
def select(b, node, args, kwargs):
    b.node("Gather", [_tensor(node, args[0]), b.const(np.array(args[2], dtype=np.int64), "index")], _out(node),
           axis=args[1])


@aten("aten.index_select.default")
def index_select(b, node, args, kwargs):
    b.node("Gather", [_tensor(node, args[0]), _tensor(node, args[2])], _out(node), axis=args[1])


_COMPARE = {"ge": "GreaterOrEqual", "gt": "Greater", "le": "LessOrEqual", "lt": "Less", "eq": "Equal"}
for _name, _onnx in _COMPARE.items():
    def _scalar_compare(b, node, args, kwargs, _onnx=_onnx):
        x = _tensor(node, args[0])
        b.node(_onnx, [x, _number_like(b, node, args[1], x)], _out(node))

    def _tensor_compare(b, node, args, kwargs, _onnx=_onnx):
        b.node(_onnx, [_tensor(node, args[0]), _tensor(node, args[1])], _out(node))

    ATEN_EMITTERS[f"aten.{_name}.Scalar"] = _scalar_compare
    ATEN_EMITTERS[f"aten.{_name}.Tensor"] = _tensor_compare

_LOGICAL = {"aten.bitwise_and.Tensor": "And", "aten.logical_and.default": "And",
            "aten.bitwise_or.Tensor": "Or", "aten.logical_or.default": "Or",
            "aten.maximum.default": "Max", "aten.minimum.default": "Min"}
for _target, _onnx in _LOGICAL.items():
    def _two(b, node, args, kwargs, _onnx=_onnx):
        a, c = _tensor(node, args[0]), _tensor(node, args[1])
        if _onnx in ("And", "Or") and b.graph.values[a].dtype != "bool":
            raise Unexportable("bitwise ops on integers")
        b.node(_onnx, [a, c], _out(node))
    ATEN_EMITTERS[_target] = _two

_UNARY = {"aten.isnan.default": "IsNaN", "aten.sqrt.default": "Sqrt", "aten.logical_not.default": "Not",
          "aten.exp.default": "Exp", "aten.neg.default": "Neg", "aten.abs.default": "Abs", "aten.erf.default": "Erf"}
for _target, _onnx in _UNARY.items():
    def _one(b, node, args, kwargs, _onnx=_onnx):
        b.node(_onnx, [_tensor(node, args[0])], _out(node))
    ATEN_EMITTERS[_target] = _one


@aten("aten.where.self")
def where(b, node, args, kwargs):
    b.node("Where", [_tensor(node, a) for a in args[:3]], _out(node))


@aten("aten.add.Tensor")
def add(b, node, args, kwargs):
    alpha = kwargs.get("alpha", 1)
    x = _tensor(node, args[0])
    other = _tensor(node, args[1]) if isinstance(args[1], dict) and "$in" in args[1] else _number_like(b, node, args[1], x)
    if alpha != 1:
        other = b.node("Mul", [other, _number_like(b, node, alpha, x)])[0]
    b.node("Add", [x, other], _out(node))


@aten("aten.sum.dim_IntList", "aten.mean.dim")
def reduce(b, node, args, kwargs):
    x = _tensor(node, args[0])
    dims = args[1] if len(args) > 1 else None
    keep = int(bool(args[2] if len(args) > 2 else kwargs.get("keepdim", False)))
    if kwargs.get("dtype") is not None:
        raise Unexportable("a reduction with a dtype")
    op = "ReduceSum" if node.attrs["target"].startswith("aten.sum") else "ReduceMean"
    if op == "ReduceSum":
        axes = [b.const(np.array(dims if isinstance(dims, list) else [dims], dtype=np.int64), "axes")] if dims else []
        b.node(op, [x, *axes], _out(node), keepdims=keep)
    else:
        b.node(op, [x], _out(node), keepdims=keep, axes=list(dims if isinstance(dims, list) else [dims]))


@aten("aten.linalg_vector_norm.default")
def vector_norm(b, node, args, kwargs):
    ord_ = args[1] if len(args) > 1 else 2
    if ord_ != 2 or kwargs.get("dtype") is not None:
        raise Unexportable("a vector norm other than the 2-norm")
    dims = args[2] if len(args) > 2 else None
    keep = int(bool(args[3] if len(args) > 3 else False))
    attrs = {"keepdims": keep}
    if dims is not None:
        attrs["axes"] = list(dims if isinstance(dims, list) else [dims])
    b.node("ReduceL2", [_tensor(node, args[0])], _out(node), **attrs)


@aten("aten.clamp.default")
def clamp(b, node, args, kwargs):
    x = _tensor(node, args[0])
    bounds = [(_number_like(b, node, v, x) if v is not None else "") for v in (args[1:3] + [None, None])[:2]]
    b.node("Clip", [x, *bounds], _out(node))


@aten("aten.cat.default")
def cat(b, node, args, kwargs):
    b.node("Concat", [_tensor(node, v) for v in args[0]], _out(node), axis=args[1] if len(args) > 1 else 0)


@aten("aten.scalar_tensor.default")
def scalar_tensor(b, node, args, kwargs):
    spec = b.graph.values[node.outputs[0]]
    value = args[0]
    if isinstance(value, dict) and "$sym" in value:
        b.node("Cast", [b.node("Squeeze", [b.dim(value["$sym"])])[0]], _out(node), to=_onnx_dtype(spec.dtype))
        return
    b.node("Identity", [b.const(np.array(value, dtype=numpy_dtype(spec.dtype)), "s")], _out(node))


@aten("aten.index.Tensor")
def index(b, node, args, kwargs):
    """x[i0, i1, ...] with one index tensor per leading dim (broadcast together): a Gather on x
    flattened over those dims, at sum(i_d * stride_d) (negative indices counted from the end)."""
    x = _tensor(node, args[0])
    indices = args[1]
    if any(i is None for i in indices):
        raise Unexportable("indexing with None (slices) between the index tensors")
    shape = b.node("Shape", [x])[0]
    flat = None
    for d, value in enumerate(indices):
        idx = _tensor(node, value)
        size = b.node("Gather", [shape, b.const(np.array(d, dtype=np.int64), "d")], axis=0)[0]
        zero = b.const(np.array(0, dtype=np.int64), "zero")
        idx = b.node("Where", [b.node("Less", [idx, zero])[0], b.node("Add", [idx, size])[0], idx])[0]
        flat = idx if flat is None else b.node("Add", [b.node("Mul", [flat, size])[0], idx])[0]
    k = len(indices)
    rest = b.node("Slice", [shape, b.const(np.array([k], dtype=np.int64), "k"),
                            b.const(np.array([2**62], dtype=np.int64), "end")])[0]
    flat_x = b.node("Reshape", [x, b.node("Concat", [b.const(np.array([-1], dtype=np.int64), "m1"), rest], axis=0)[0]])[0]
    b.node("Gather", [flat_x, flat], _out(node), axis=0)


def _onnx_dtype(name: str) -> int:
    from .layout import onnx_type
    return onnx_type(name)
