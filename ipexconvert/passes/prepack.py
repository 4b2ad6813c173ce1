"""prepack: store conv2d / linear / matmul weights in the plain form the native kernels pack at load.

oneDNN's packed (blocked) weights are opaque tensors: they cannot be serialised and
their layout depends on the CPU, so the artifact keeps plain weights and each kernel
packs its weight once when the model loads (backends/cpu/kernels). This pass makes
sure every weight arrives in the form those kernels take:

- linear: the weight is stored contiguous [out, in], the layout
  mkldnn._reorder_linear_weight expects (it cannot tell a transposed square weight
  from the right one).
- matmul whose right operand is a constant 2-D b [k, n] (models that write x @ W)
  becomes linear with weight b^T stored contiguous [n, k], so the linear kernel packs
  it. A shared b keeps its other readers: they get the original, the linears a copy.
- conv2d: nothing to rewrite (the channels_last pass marks conv weights; the
  executor converts them at load); packable ones are counted.

Counts: conv2d_packable and linear_packable (weights the oneDNN kernels will pack,
rewritten matmuls included), matmul_to_linear.
"""
from __future__ import annotations

from ..ir import Node, Program
from .base import PassOptions, register_pass
from .matmul_to_linear import matmuls_to_linears

_FLOATS = {"float32", "bfloat16"}


def _packable(program: Program, node: Node, weight_rank: int) -> bool:
    """Constant weight (and bias, if any) of the activation's float dtype: what the oneDNN kernels take."""
    values = program.graph.values
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if x is None or not program.is_constant(w) or (bias is not None and not program.is_constant(bias)):
        return False
    return (values[w].rank == weight_rank and values[x].dtype in _FLOATS
            and values[w].dtype == values[x].dtype)


@register_pass("prepack", "weights in the plain layout the native conv/linear kernels pack at load")
def prepack(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    counts = {"conv2d_packable": 0, "linear_packable": 0, "matmul_to_linear": 0}

    counts["matmul_to_linear"] = matmuls_to_linears(program)  # matmuls made after the early pass

    for n in graph.nodes:
        if n.op == "linear" and _packable(program, n, 2):
            w = n.inputs[1]
            if not program.weights[w].is_contiguous():
                program.weights[w] = program.weights[w].contiguous()
            counts["linear_packable"] += 1
        elif n.op == "conv2d" and _packable(program, n, 4):
            counts["conv2d_packable"] += 1
    return counts
