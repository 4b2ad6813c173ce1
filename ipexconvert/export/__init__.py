"""Writing artifacts in other formats (export/onnx/: ONNX)."""
