"""The GPU backend's load-time rewrite after prologues.py: a decoder layer's merged q/k/v projection (woq_linear, or
prologue_woq_linear with its rms_norm) whose value only a rope_kv_write reads becomes one woq_linear_rope_kv_write
node (ir/ops/woq_linear_rope_kv_write.py): the GEMV's last program of each column block rotates the heads it holds
and writes q, k and v where rope_kv_write would, so a decode step has one kernel fewer a layer (on an H200 the 22
rope_kv_write kernels of a TinyLlama step cost 35 us a token:
benchmarks/results/session55-gpu-decode-attention-h200.md).
Only where the fused kernel takes the layer (kernels/woq_linear_rope_kv_write.fits) and Triton is here: the op has
no other GPU kernel. The artifact keeps the plain ops; a CPU runs them as written."""
from __future__ import annotations

from ...ir import Program
from ...ir.graph import Node
from .kernels._triton import triton_missing
from .kernels.woq_linear_rope_kv_write import fits
from .prologues import SoleReaders, joined_program

PROJECTIONS = ("woq_linear", "prologue_woq_linear")
ENABLED = True  # read at load (benchmarks/gpu_decode.py's "+noepilogue" loads without the rewrite)


def fuse_rope_epilogues(program: Program, level: str) -> Program:
    """A copy of the program with the pairs joined (the weights shared); the program itself when none is found."""
    if not ENABLED or triton_missing(level) is not None:
        return program
    graph = program.graph
    sole = SoleReaders(graph)
    joined: dict[str, Node] = {}  # rope_kv_write node name -> its replacement
    absorbed: set[str] = set()  # the projections' node names
    for node in graph.nodes:
        if node.op != "rope_kv_write" or len(node.inputs) != 6:  # (three separate projections: not this form)
            continue
        producer = sole.producer(node.inputs[0], PROJECTIONS)
        if producer is None:
            continue
        attrs = producer.attrs
        prologue = attrs.get("prologue")
        cache = graph.values.get(node.inputs[3])
        if prologue not in (None, "rms_norm") or cache is None or len(cache.shape) != 4 \
                or not isinstance(cache.shape[3], int) \
                or not fits(cache.shape[3], cache.dtype, attrs.get("activations", "float"), attrs.get("post_ops", [])):
            continue
        norm_weight = producer.inputs[5] if prologue == "rms_norm" else None
        joined[node.name] = Node(name=node.name, op="woq_linear_rope_kv_write", outputs=node.outputs,
                                 attrs={**attrs, "prologue": prologue},
                                 inputs=[*producer.inputs[:5], norm_weight, *node.inputs[1:]], source=node.source)
        absorbed.add(producer.name)
    return joined_program(program, joined, absorbed)
