"""fuse_layout_change: a float input's cast, channels-last copy and quantize become one node.

A CNN's NCHW float32 input reaches its first convolution through up to three nodes, each a pass
over the tensor: to_dtype (bf16, from the to_bf16 pass), to_memory_format (channels_last, from
the channels_last pass) and, for int8, quantize. torch's channels-last copy of a 3-channel tensor
is the slow one (5.8 ms for bfloat16 at [16, 3, 224, 224] on 2 threads). Here:
- to_dtype -> to_memory_format(channels_last) becomes to_memory_format with `dtype`;
- to_memory_format(channels_last) -> quantize becomes quantize with memory_format channels_last,
  reading the float input itself. A bf16 cast folded in before is dropped with it: the codes are
  rounded once from the float32 values instead of from their bf16 roundings.
The native to_channels_last kernel runs either node in one pass. Only nodes whose output has no
other reader are folded.

Counts: casts_folded, quantizes_folded.
"""
from __future__ import annotations

from ..ir import Program
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, single_user

_FLOATS = ("float32", "bfloat16")


@register_pass("fuse_layout_change", "a float input's cast, channels-last copy and quantize run as one node")
def fuse_layout_change(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers, users = graph.producers(), graph.users()
    doomed: set[str] = set()
    casts = quantizes = 0
    for node in graph.nodes:
        if node.op != "to_memory_format" or node.attrs["memory_format"] != "channels_last" or node.attrs.get("dtype"):
            continue
        cast = producers.get(node.inputs[0])
        if cast is None or cast.op != "to_dtype" or single_user(graph, cast.outputs[0], users) is not node:
            continue
        if cast.attrs["dtype"] not in _FLOATS or graph.values[cast.inputs[0]].dtype not in _FLOATS:
            continue
        node.inputs = [cast.inputs[0]]
        node.attrs = {**node.attrs, "dtype": cast.attrs["dtype"]}
        doomed.add(cast.name)
        casts += 1
    users = graph.users()
    for node in graph.nodes:
        if node.op != "quantize" or len(node.inputs) != 1 or node.attrs.get("memory_format"):
            continue
        layout = producers.get(node.inputs[0])
        if (layout is None or layout.op != "to_memory_format" or layout.attrs["memory_format"] != "channels_last"
                or single_user(graph, layout.outputs[0], users) is not node):
            continue
        x = graph.values[layout.inputs[0]]
        if x.dtype not in _FLOATS or x.rank != 4:
            continue
        node.inputs = [layout.inputs[0]]
        node.attrs = {**node.attrs, "memory_format": "channels_last"}
        doomed.add(layout.name)
        quantizes += 1
    if doomed:
        remove_nodes(program, doomed)
    return {"casts_folded": casts, "quantizes_folded": quantizes}
