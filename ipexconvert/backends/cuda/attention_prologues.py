"""The GPU backend's load-time rewrite after epilogues.py: an attention (sdpa) whose value, its heads merged
(permute [0, 2, 1, 3], then a reshape of the last two dims into one), only a woq_linear reads (the layer's output
projection) becomes one sdpa_woq_linear node (ir/ops/sdpa_woq_linear.py). Its kernel leaves the attention's key
splits uncombined and the projection combines them as it reads its input: on an H200 the combine by the attention's
last program and its ticket cost ~4 us a layer (benchmarks/results/session55-gpu-decode-attention-h200.md).
Only where the fused kernel can take the layer (kernels/sdpa_woq_linear.fits) and Triton is here. The artifact keeps
the plain ops; a CPU runs them as written."""
from __future__ import annotations

from ...ir import Program
from ...ir.graph import Graph, Node
from ...ir.ops._common import same_dim
from ...ir.ops._kv_int8 import head_dim_of
from ...ir.ops.sdpa_woq_linear import OWN_INPUTS, WOQ_INPUTS
from ...ir.postops import shift_operands
from .kernels._triton import triton_missing
from .kernels.sdpa_woq_linear import fits
from .prologues import SoleReaders, joined_program

HEADS_LAST = [0, 2, 1, 3]
ENABLED = True  # read at load (benchmarks/gpu_decode.py's "+noattentionprologue" loads without the rewrite)


def fuse_attention_prologues(program: Program, level: str) -> Program:
    """A copy of the program with each such attention joined to its projection (the weights shared); the program
    itself when none is found."""
    if not ENABLED or triton_missing(level) is not None:
        return program
    graph = program.graph
    sole = SoleReaders(graph)
    joined: dict[str, Node] = {}  # woq_linear node name -> its replacement
    absorbed: set[str] = set()  # the sdpa, permute and reshape node names
    for node in graph.nodes:
        if node.op != "woq_linear":
            continue
        reshape = sole.producer(node.inputs[0], ("reshape",))
        permute = reshape and sole.producer(reshape.inputs[0], ("permute",))
        sdpa = permute and sole.producer(permute.inputs[0], ("sdpa",))
        if not sdpa or permute.attrs.get("perm") != HEADS_LAST or not merges_heads(graph, sdpa, reshape) \
                or not takes(graph, sdpa, node):
            continue
        attrs = {**node.attrs, "attention": sdpa.attrs,
                 "post_ops": shift_operands(node.attrs.get("post_ops", []), OWN_INPUTS - WOQ_INPUTS)}
        joined[node.name] = Node(name=node.name, op="sdpa_woq_linear", outputs=node.outputs, attrs=attrs,
                                 inputs=[*sdpa.inputs, *node.inputs[1:]], source=node.source)
        absorbed.update((sdpa.name, permute.name, reshape.name))
    return joined_program(program, joined, absorbed)


def merges_heads(graph: Graph, sdpa: Node, reshape: Node) -> bool:
    """Whether the reshape makes [batch, seq, heads * head dim] of the attention's [batch, heads, seq, head dim]."""
    heads, merged = graph.values.get(sdpa.outputs[0]), graph.values.get(reshape.outputs[0])
    if heads is None or merged is None or len(heads.shape) != 4 or len(merged.shape) != 3:
        return False
    b, h, length, dv = heads.shape
    return (same_dim(merged.shape[0], b) and same_dim(merged.shape[1], length) and isinstance(h, int)
            and isinstance(dv, int) and merged.shape[2] == h * dv)


def takes(graph: Graph, sdpa: Node, projection: Node) -> bool:
    """Whether the fused kernel can take this pair: an attention that neither quantizes nor is causal, of 4 inputs
    (q, k, v, mask), and a projection of float activations whose words of codes lie inside one head."""
    attrs = sdpa.attrs
    if attrs.get("quantize") is not None or attrs.get("is_causal") or len(sdpa.inputs) != 4:
        return False
    value = graph.values.get(sdpa.inputs[2])
    head_dim = None if value is None else head_dim_of(value.dtype, value.shape[-1])
    return isinstance(head_dim, int) and fits(head_dim, projection.attrs.get("bits", 8),
                                              projection.attrs.get("activations", "float"))
