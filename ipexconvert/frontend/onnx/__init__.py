"""The ONNX frontend: .onnx files read through a table of ONNX ops (ops/), traced into the IR."""
