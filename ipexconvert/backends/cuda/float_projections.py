"""The GPU backend's first load-time rewrite: in a decoder (a graph that writes a KV cache), each bf16 linear layer
whose weight (and bias) is stored becomes a woq_linear of 16-bit codes (ir/ops/woq_linear.py, bits 16): the weight
itself as the codes, one scale of 1.0 a row, a float32 copy of the bias. Its decode rows then run our GEMV
(kernels/woq_linear.py, woq_rows: programmatic dependent launch, k split among ~512 programs), and the joins that
follow take the layer as they take int8 / int4 ones (prologues.py, epilogues.py, attention_prologues.py): a
TinyLlama layer's decode step is 5 kernels instead of cuBLAS's GEMVs and 5 small kernels of their own between them.
A prompt's rows run the GEMM on cuBLAS in bf16 as before (kernels/woq_linear.float_rows). Encoders (no cache) keep cuBLAS: their rows are
many. The artifact keeps the linear layers; a CPU runs them as written."""
from __future__ import annotations

from typing import Optional

import torch

from ...ir import Program
from ...ir.graph import Node
from ...ir.ops.woq_linear import FLOAT_BITS, WoqLinearAttrs
from ...ir.postops import shift_operands
from ...runtime.static_cache import STATIC_WRITES
from .kernels._triton_int8 import post_op_codes

ENABLED = True  # read at load (benchmarks/gpu_decode.py's "+nofloatprojections" loads without the rewrite)


def float_projections(program: Program) -> Program:
    """A copy of the program with its bf16 linear layers as bits-16 woq_linear nodes (the weights shared, scales and
    float32 biases added); the program itself when it writes no cache or has no such layer."""
    graph = program.graph
    if not ENABLED or not any(node.op in STATIC_WRITES for node in graph.nodes):
        return program
    weights = program.weights
    layers = [(node, attrs) for node in graph.nodes if (attrs := woq_attrs(program, node)) is not None]
    if not layers:
        return program
    rewritten = Program(graph.model_copy(deep=True), dict(weights))
    joined: dict[str, Node] = {}
    for node, attrs in layers:
        x, weight, bias = node.inputs[:3]
        scales = rewritten.add_constant(f"{node.name}.unit_scales", torch.ones(weights[weight].shape[0], 1))
        bias32 = None if bias is None else rewritten.add_constant(f"{node.name}.bias", weights[bias].float())
        joined[node.name] = Node(name=node.name, op="woq_linear", outputs=node.outputs, attrs=attrs,
                                 inputs=[x, weight, scales, None, bias32, *node.inputs[3:]], source=node.source)
    rewritten.graph.nodes = [joined.get(n.name, n) for n in graph.nodes]
    rewritten.prune()
    return rewritten


def woq_attrs(program: Program, node: Node) -> Optional[dict]:
    """The bits-16 woq_linear attrs of a bf16 linear layer the rewrite takes (post-op operands moved past the scales
    and zero points, which linear has not), or None: a stored 2-D weight of an even number of inputs (whole words of
    two), a stored bias or none, post-ops the GEMV's epilogue takes."""
    if node.op != "linear" or len(node.inputs) < 3:
        return None
    x, weight, bias = node.inputs[:3]
    graph, weights = program.graph, program.weights
    x_spec, w_spec = graph.values.get(x), graph.values.get(weight)
    if x_spec is None or w_spec is None or x_spec.dtype != "bfloat16" or w_spec.dtype != "bfloat16" \
            or weight not in weights or weights[weight].dim() != 2 or (bias is not None and bias not in weights):
        return None
    k = weights[weight].shape[1]
    attrs = {"bits": FLOAT_BITS, "group_size": k, "activations": "float",
             "post_ops": shift_operands(node.attrs.get("post_ops", []), 2)}
    fits = k % 2 == 0 and post_op_codes(WoqLinearAttrs.model_validate(attrs).post_ops) is not None
    return attrs if fits else None
