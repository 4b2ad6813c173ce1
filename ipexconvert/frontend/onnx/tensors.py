"""ONNX tensors and element types as torch ones (only the dtypes the IR has; others are refused)."""
from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from ...errors import UserInputError
from .ops._registry import Unconvertible

DTYPES: dict[int, torch.dtype] = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT16: torch.int16,
    onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.UINT8: torch.uint8,
    onnx.TensorProto.BOOL: torch.bool,
}
ONNX_OF = {v: k for k, v in DTYPES.items()}


def dtype_of(elem_type: int) -> torch.dtype:
    try:
        return DTYPES[elem_type]
    except KeyError:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise Unconvertible(f"element type {name} (supported: "
                            f"{', '.join(onnx.TensorProto.DataType.Name(t) for t in DTYPES)})") from None


def to_torch(proto: onnx.TensorProto) -> torch.Tensor:
    dtype = dtype_of(proto.data_type)
    try:
        array = numpy_helper.to_array(proto)
    except Exception as e:  # data of another size than the dims say (onnx.checker does not compare them)
        raise UserInputError(f"ONNX tensor {proto.name!r} holds data that does not fit its dims {list(proto.dims)} "
                             f"({type(e).__name__}: {' '.join(str(e).split())[:200]})",
                             "the file is damaged or its exporter wrote it wrong: export the model again") from None
    if proto.data_type == onnx.TensorProto.BFLOAT16:  # ml_dtypes' bfloat16: reinterpret the 16-bit words
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True)).to(dtype)


def from_numpy(array: np.ndarray) -> torch.Tensor:
    if not isinstance(array, np.ndarray):
        raise Unconvertible(f"a {type(array).__name__} value (sequences and optionals are not tensors)")
    if array.dtype == object:
        raise Unconvertible("string tensors")
    if array.dtype.name == "bfloat16":  # ml_dtypes
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16).copy()).view(torch.bfloat16)
    if array.dtype.kind not in "fiub" or array.dtype.name not in ("float64", "float32", "float16", "int64", "int32",
                                                                 "int16", "int8", "uint8", "bool"):
        raise Unconvertible(f"element type {array.dtype}")
    tensor = torch.from_numpy(np.array(array, copy=True))
    if tensor.dtype not in ONNX_OF:
        raise Unconvertible(f"element type {array.dtype}")
    return tensor
