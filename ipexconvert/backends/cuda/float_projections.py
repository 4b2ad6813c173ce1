"""The GPU backend's first load-time rewrite: in a decoder (a graph that writes a KV cache), each bf16 linear layer
whose weight (and bias) is stored becomes a woq_linear of 16-bit codes (ir/ops/woq_linear.py, bits 16): the weight
itself as the codes, one scale of 1.0 a row, a float32 copy of the bias. Its decode rows then run our GEMV
(kernels/woq_linear.py, woq_rows: programmatic dependent launch, k split among ~512 programs), and the joins that
follow take the layer as they take int8 / int4 ones (prologues.py, epilogues.py, attention_prologues.py): a
TinyLlama layer's decode step is 5 kernels instead of cuBLAS's GEMVs and 5 small kernels of their own between them.
A prompt's rows run the GEMM in bf16 as before (the op's reference). Encoders (no cache) keep cuBLAS: their rows are
many. The artifact keeps the linear layers; a CPU runs them as written."""
from __future__ import annotations

import torch

from ...ir import Program
from ...ir.graph import Node
from ...ir.ops.woq_linear import FLOAT_BITS, WoqLinearAttrs
from ...ir.postops import shift_operands
from .kernels._triton_int8 import post_op_codes

CACHE_WRITERS = ("rope_kv_write", "kv_write")  # a decoder's static cache (runtime/static_cache.py)
ENABLED = True  # read at load (benchmarks/gpu_decode.py's "+nofloatprojections" loads without the rewrite)


def float_projections(program: Program) -> Program:
    """A copy of the program with its bf16 linear layers as bits-16 woq_linear nodes (the weights shared, scales and
    float32 biases added); the program itself when it writes no cache or has no such layer."""
    graph = program.graph
    if not ENABLED or not any(node.op in CACHE_WRITERS for node in graph.nodes):
        return program
    weights = program.weights
    layers = [node for node in graph.nodes if takes(program, node)]
    if not layers:
        return program
    rewritten = Program(graph.model_copy(deep=True), dict(weights))
    joined: dict[str, Node] = {}
    for node in layers:
        x, weight, bias = node.inputs[:3]
        n, k = weights[weight].shape
        scales = rewritten.add_constant(f"{node.name}.unit_scales", torch.ones(n, 1))
        bias32 = None if bias is None else rewritten.add_constant(f"{node.name}.bias", weights[bias].float())
        joined[node.name] = Node(name=node.name, op="woq_linear", outputs=node.outputs, attrs=woq_attrs(node, k),
                                 inputs=[x, weight, scales, None, bias32, *node.inputs[3:]], source=node.source)
    rewritten.graph.nodes = [joined.get(n.name, n) for n in graph.nodes]
    rewritten.prune()
    return rewritten


def woq_attrs(node: Node, k: int) -> dict:
    """The bits-16 woq_linear attrs of a linear node of k input features (post-op operands moved past the scales and
    zero points, which linear has not)."""
    return {"bits": FLOAT_BITS, "group_size": k, "activations": "float",
            "post_ops": shift_operands(node.attrs.get("post_ops", []), 2)}


def takes(program: Program, node: Node) -> bool:
    """Whether this node is a bf16 linear layer the rewrite takes: a stored 2-D weight of an even number of inputs
    (whole words of two), a stored bias or none, post-ops the GEMV's epilogue takes."""
    if node.op != "linear" or len(node.inputs) < 3:
        return False
    x, weight, bias = node.inputs[:3]
    graph, weights = program.graph, program.weights
    x_spec, w_spec = graph.values.get(x), graph.values.get(weight)
    if x_spec is None or w_spec is None or x_spec.dtype != "bfloat16" or w_spec.dtype != "bfloat16" \
            or weight not in weights or weights[weight].dim() != 2 or (bias is not None and bias not in weights):
        return False
    k = weights[weight].shape[1]
    return k % 2 == 0 and post_op_codes(WoqLinearAttrs.model_validate(woq_attrs(node, k)).post_ops) is not None
