"""quantize_before_pool: max_pool2d -> quantize becomes quantize -> max_pool2d on the codes.

Quantizing (round, clamp, per tensor) never reverses the order of two values, so the largest code
in a window is the code of the largest value: the pool's output is the same either way. Moved in
front, the quantize is the only reader of the layer before the pool (ResNet's stem conv), which
fold_requantize (next) then makes write uint8 itself; the pool reads and writes 1 byte a value
instead of 2, and the quantize node goes. ResNet-50 int8, stem conv + pool (+ quantize) alone:
0.77 of the time at batch 1, 0.82 at batch 16; whole model 0.993 and 0.994 at batch 1, 1.006 and
0.952 at batch 16 (same process, docs/quantization.md). The codes can move by one where the float
value sat next to a rounding boundary: the folded conv quantizes its float32 result, where the
quantize node read it rounded to bf16.

Only per-tensor quantize readers with one parameter set qualify (a per-channel multiplier runs
along the last axis, which pooling does not keep), and only when the pool's output has no other
reader.

Counts: quantize_moved_before_pool.
"""
from __future__ import annotations

from ..ir import Program
from .base import PassOptions, register_pass
from .rewrite import absorb_readers, quantize_params, remove_nodes, replace_uses


@register_pass("quantize_before_pool", "a quantize after max_pool2d runs before it, on the pool's input")
def quantize_before_pool(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    moved, doomed = 0, set()
    for pool in list(graph.nodes):
        if pool.op != "max_pool2d" or pool.outputs[0] in graph.outputs:
            continue
        pooled = pool.outputs[0]
        readers = users.get(pooled, [])
        if not readers or any(r.op != "quantize" or len(r.inputs) > 1 for r in readers):
            continue
        if len({quantize_params(r) for r in readers}) != 1:
            continue
        first, x = readers[0], pool.inputs[0]
        codes = first.outputs[0]
        # x -> first (codes, x's shape and layout) -> pool (pooled, now codes too) -> the readers' readers
        first.inputs = [x]
        graph.values[codes] = graph.values[x].with_(dtype=graph.values[codes].dtype)
        graph.values[pooled] = graph.values[pooled].with_(dtype=graph.values[codes].dtype)
        replace_uses(graph, codes, pooled)  # the first reader stays, moved before the pool
        absorb_readers(graph, readers[1:], pooled, doomed)
        pool.inputs = [codes, *pool.inputs[1:]]
        graph.nodes.remove(first)
        graph.nodes.insert(graph.nodes.index(pool), first)
        moved += 1
    if doomed:
        remove_nodes(program, doomed)
    return {"quantize_moved_before_pool": moved}
