"""Small ONNX models built with onnx.helper for the frontend tests."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((16, 8)).astype(np.float32)
B1 = RNG.standard_normal(16).astype(np.float32)


def mlp(opset: int = 17, input_name: str = "x") -> onnx.ModelProto:
    """Gemm -> Relu -> a reshape to (batch, -1) computed from Shape, as exporters write it."""
    nodes = [
        helper.make_node("Gemm", [input_name, "W", "B"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["y"]),
        helper.make_node("Shape", ["y"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["bu"]),
        helper.make_node("Concat", ["bu", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["y", "shape"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(W1, "W"), numpy_helper.from_array(B1, "B"),
         numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
         numpy_helper.from_array(np.array([0], dtype=np.int64), "ax0"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def mlp_reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W1.T + B1, 0)


def with_nodes(nodes: list, opset: int = 17, extra_opsets: tuple = ()) -> onnx.ModelProto:
    """x [2, 4] float -> the nodes -> y."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets)
