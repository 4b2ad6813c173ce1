"""ONNX Runtime as an oracle: the reference an ONNX-sourced conversion is checked against, and
what `check --reference model.onnx` runs. ONNX Runtime is an optional extra; None without it."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import torch

from ...errors import UserInputError
from . import tensors


def session(proto: onnx.ModelProto):
    """An ONNX Runtime CPU session for the model, or None (not installed, or it refuses the model).

    A model with QuantizeLinear runs with ORT's graph optimizations off: optimized, ORT executes
    Q/DQ pairs as its own integer kernels, whose rounding differs from the ops' definition (a few
    codes apart on a small CNN); the oracle is the definition."""
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.x64quantprecision", "1")  # exact integer kernels without VNNI too
    if any(n.op_type == "QuantizeLinear" for n in proto.graph.node):
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        return onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # ORT lacks an op or a type
        return None


def runner(sess) -> Callable[[list[torch.Tensor]], tuple[torch.Tensor, ...]]:
    """Run the session on inputs given in the graph's input order; outputs in the graph's output order."""
    names = [i.name for i in sess.get_inputs()]

    def run(inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        feeds = {n: t.detach().contiguous().numpy() for n, t in zip(names, inputs)}
        try:
            outputs = sess.run(None, feeds)
        except Exception as e:  # ORT's own error types: the model does not run as ONNX Runtime reads it
            raise UserInputError("ONNX Runtime, the reference this conversion is checked against, cannot run the "
                                 f"model: {' '.join(str(e).split())[:300]}",
                                 "check the model with onnxruntime.InferenceSession; where ONNX Runtime is not "
                                 "installed, ipexconvert checks against its own reading of the graph") from None
        return tuple(tensors.from_numpy(np.asarray(o)) for o in outputs)

    return run

