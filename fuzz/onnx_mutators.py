"""Mutations of an ONNX ModelProto for fuzz_onnx.py: each takes the model (changed in place) and a random.Random,
and returns what it did, or None where the model has nothing it applies to. Registered in MUTATORS by name."""
from __future__ import annotations

import copy
import random
from typing import Callable, Optional

import onnx
from onnx import TensorProto, helper, numpy_helper

Mutator = Callable[[onnx.ModelProto, random.Random], Optional[str]]
MUTATORS: dict[str, Mutator] = {}

EDGE_INTS = [-2**31, -7, -1, 0, 1, 2, 3, 5, 64, 2**31 - 1, 2**40]
EDGE_FLOATS = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-30, 1e30]
ATTRIBUTE_NAMES = ["axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group", "transA", "transB",
                   "epsilon", "keepdims", "alpha", "beta", "to", "mode", "ceil_mode", "split", "starts", "ends"]
# supported op types and a few that are not (the table must refuse those in one error)
OP_TYPES = ["Relu", "Gemm", "MatMul", "Add", "Mul", "Reshape", "Transpose", "Softmax", "Conv", "MaxPool", "Gather",
            "Concat", "Slice", "Split", "Cast", "Unsqueeze", "Squeeze", "LayerNormalization", "Erf", "ReduceMean",
            "Pow", "Sqrt", "Div", "Sub", "Where", "Expand", "Flatten", "GlobalAveragePool", "Shape",
            "ConstantOfShape", "Range", "Tile", "Pad", "Resize", "TopK", "NonZero", "Loop", "If", "Einsum"]
ELEMENT_TYPES = [TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.INT64, TensorProto.BOOL,
                 TensorProto.STRING, TensorProto.BFLOAT16, TensorProto.UINT8, TensorProto.COMPLEX64, 0, 99]
# static input sizes: small enough that a conversion's example inputs stay small (a huge declared input is the
# user's to ask for), but zero, one and sizes the example model was not made for
INPUT_SIZES = [0, 1, 3, 7, 1000]
DIM_NAMES = ["b", "batch*2", "__import__('os')", "a b", "", "x" * 300, "seq"]


def mutator(fn: Mutator) -> Mutator:
    MUTATORS[fn.__name__] = fn
    return fn


def _value_names(model: onnx.ModelProto) -> list[str]:
    g = model.graph
    return [v for n in g.node for v in [*n.input, *n.output]] + [t.name for t in g.initializer]


@mutator
def attribute_value(model, rng):
    """An attribute set to an edge value of its type."""
    found = [(n, a) for n in model.graph.node for a in n.attribute]
    if not found:
        return None
    node, a = rng.choice(found)
    if a.type == onnx.AttributeProto.INT:
        a.i = rng.choice(EDGE_INTS)
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice(EDGE_FLOATS)
    elif a.type == onnx.AttributeProto.INTS:
        del a.ints[:]
        a.ints.extend(rng.choice(EDGE_INTS) for _ in range(rng.randint(0, 5)))
    elif a.type == onnx.AttributeProto.STRING:
        a.s = rng.choice([b"", b"xx", b"constant", b"nearest", b"\xff\xfe"])
    elif a.type == onnx.AttributeProto.TENSOR:
        a.t.dims[:] = [rng.choice([0, 1, 2, 3, 100000])] if rng.random() < 0.5 else list(a.t.dims)[:-1]
    return f"{node.op_type}.{a.name}"


@mutator
def attribute_drop(model, rng):
    found = [n for n in model.graph.node if n.attribute]
    if not found:
        return None
    node = rng.choice(found)
    a = rng.choice(list(node.attribute))
    node.attribute.remove(a)
    return f"{node.op_type}.{a.name}"


@mutator
def attribute_add(model, rng):
    """An attribute the node may not take, of any type."""
    node = rng.choice(list(model.graph.node))
    name = rng.choice(ATTRIBUTE_NAMES)
    value = rng.choice([rng.choice(EDGE_INTS), [rng.choice(EDGE_INTS) for _ in range(rng.randint(1, 4))],
                        rng.choice(EDGE_FLOATS), "foo"])
    node.attribute.append(helper.make_attribute(name, value))
    return f"{node.op_type}.{name} = {value!r}"[:80]


@mutator
def initializer_dims(model, rng):
    """A weight's dims changed, its data kept (too many values, too few, another rank)."""
    if not model.graph.initializer:
        return None
    t = rng.choice(list(model.graph.initializer))
    dims, roll = list(t.dims), rng.random()
    if roll < 0.3 and dims:
        dims[rng.randrange(len(dims))] = rng.choice([0, 1, 2, 3, 1 << 20, 1 << 40])
    elif roll < 0.6:
        dims = dims[:-1] if dims else [2]
    else:
        dims = dims + [rng.choice([1, 2])]
    t.dims[:] = dims
    return f"{t.name} -> {dims}"


@mutator
def initializer_type(model, rng):
    if not model.graph.initializer:
        return None
    t = rng.choice(list(model.graph.initializer))
    t.data_type = rng.choice(ELEMENT_TYPES)
    return f"{t.name} -> {t.data_type}"


@mutator
def initializer_data(model, rng):
    """A weight's bytes cut in half, padded or overwritten in places."""
    found = [t for t in model.graph.initializer if t.raw_data]
    if not found:
        return None
    t = rng.choice(found)
    raw, roll = bytearray(t.raw_data), rng.random()
    if roll < 0.3:
        raw = raw[: len(raw) // 2]
    elif roll < 0.6:
        raw += b"\x00" * 8
    else:
        for _ in range(4):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    t.raw_data = bytes(raw)
    return t.name


@mutator
def input_dim(model, rng):
    """A graph input's dim made another size, or named with text that is not an identifier."""
    found = [i for i in model.graph.input if i.type.tensor_type.shape.dim]
    if not found:
        return None
    value = rng.choice(found)
    d = rng.choice(list(value.type.tensor_type.shape.dim))
    if rng.random() < 0.5:
        d.dim_value = rng.choice(INPUT_SIZES)
    else:
        d.dim_param = rng.choice(DIM_NAMES)
    return value.name


@mutator
def node_input(model, rng):
    """A node reads another value, an empty name, or one nothing makes."""
    found = [n for n in model.graph.node if n.input]
    if not found:
        return None
    node = rng.choice(found)
    j = rng.randrange(len(node.input))
    node.input[j] = rng.choice(_value_names(model) + ["", "nope"])
    return f"{node.op_type}[{j}] -> {node.input[j]}"


@mutator
def op_type(model, rng):
    node = rng.choice(list(model.graph.node))
    old, node.op_type = node.op_type, rng.choice(OP_TYPES)
    return f"{old} -> {node.op_type}"


@mutator
def node_drop(model, rng):
    if len(model.graph.node) < 2:
        return None
    node = rng.choice(list(model.graph.node))
    model.graph.node.remove(node)
    return node.op_type


@mutator
def node_duplicate(model, rng):
    """A node twice (two makers of one value), anywhere in the order."""
    node = rng.choice(list(model.graph.node))
    model.graph.node.insert(rng.randrange(len(model.graph.node) + 1), copy.deepcopy(node))
    return node.op_type


@mutator
def opset(model, rng):
    model.opset_import[0].version = rng.choice([1, 7, 11, 13, 14, 17, 18, 20, 21, 22, 23, 99])
    return str(model.opset_import[0].version)


@mutator
def output_change(model, rng):
    """A graph output removed, or renamed to another value or to one nothing makes."""
    if not model.graph.output:
        return None
    out = rng.choice(list(model.graph.output))
    if rng.random() < 0.5:
        model.graph.output.remove(out)
        return f"{out.name} removed"
    out.name = rng.choice(_value_names(model) + ["nope"])
    return f"-> {out.name}"


@mutator
def constant_value(model, rng):
    """An integer Constant (a shape, an axis, an index) with one element set to an edge value."""
    found = [(n, a) for n in model.graph.node if n.op_type == "Constant" for a in n.attribute
             if a.type == onnx.AttributeProto.TENSOR]
    if not found:
        return None
    node, a = rng.choice(found)
    array = numpy_helper.to_array(a.t)
    if array.dtype.kind not in "iu" or not array.size:
        return None
    array = array.copy()
    try:
        array.reshape(-1)[rng.randrange(array.size)] = rng.choice(EDGE_INTS[1:-1])
    except (OverflowError, ValueError):  # a value its dtype cannot hold
        return None
    a.t.CopyFrom(numpy_helper.from_array(array, a.t.name))
    return node.output[0]
