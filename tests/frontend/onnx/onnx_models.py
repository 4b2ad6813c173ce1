"""Small ONNX models built with onnx.helper for the frontend tests."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)


def make_model(graph, opset_imports: list) -> onnx.ModelProto:
    """helper.make_model at the lowest IR version the opsets allow: onnx stamps its newest one, which the onnxruntime
    of another machine may refuse (the GPU machine's 1.30 did), and the frontend then falls back to the module oracle."""
    model = helper.make_model(graph, opset_imports=opset_imports)
    model.ir_version = helper.find_min_ir_version_for(opset_imports, ignore_unknown=True)
    return model
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
    return make_model(graph, [helper.make_opsetid("", opset)])


def mlp_reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W1.T + B1, 0)


def with_nodes(nodes: list, opset: int = 17, extra_opsets: tuple = ()) -> onnx.ModelProto:
    """x [2, 4] float -> the nodes -> y."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return make_model(graph, opsets)


def qdq_mlp(first_zero_point: int = 0) -> onnx.ModelProto:
    """QDQ form, as ONNX Runtime's quantizer writes it, of x -> Gemm -> (Relu) -> Gemm: int8 weights
    through DequantizeLinear, a Q -> DQ pair on each Gemm's input. The Relu is left out, as the
    quantizer drops one before a QuantizeLinear whose zero point 0 clamps at 0 (first_zero_point 0)."""
    rng = np.random.default_rng(1)
    w1 = rng.integers(-127, 128, (16, 8)).astype(np.int8)
    w2 = rng.integers(-127, 128, (4, 16)).astype(np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w1q", "w1s", "w1z"], ["w1"], axis=0),
        helper.make_node("Gemm", ["xd", "w1", "b1"], ["h"], transB=1),
        helper.make_node("QuantizeLinear", ["h", "hs", "hz"], ["hq"]),
        helper.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["hd"]),
        helper.make_node("DequantizeLinear", ["w2q", "w2s", "w2z"], ["w2"], axis=0),
        helper.make_node("Gemm", ["hd", "w2"], ["y"], transB=1),
    ]
    inits = [("xs", np.array(0.02, np.float32)), ("xz", np.array(128, np.uint8)),
             ("w1q", w1), ("w1s", np.full(16, 0.01, np.float32)), ("w1z", np.zeros(16, np.int8)),
             ("b1", rng.standard_normal(16).astype(np.float32) * 0.1),
             ("hs", np.array(0.015, np.float32)), ("hz", np.array(first_zero_point, np.uint8)),
             ("w2q", w2), ("w2s", np.full(4, 0.01, np.float32)), ("w2z", np.zeros(4, np.int8))]
    graph = helper.make_graph(nodes, "qdq_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
                              [numpy_helper.from_array(v, n) for n, v in inits])
    return make_model(graph, [helper.make_opsetid("", 17)])
