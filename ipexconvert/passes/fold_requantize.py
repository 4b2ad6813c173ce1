"""fold_requantize: an int8 layer whose output only feeds quantize nodes returns uint8 itself.

qconv2d -> (bf16 value) -> quantize -> qconv2d becomes qconv2d -> (uint8) -> qconv2d: the
producer requantizes in its epilogue with the consumer's input scale, so chains of int8
ops stay int8 and the float tensor between them is never written. Only producers whose
post-ops the oneDNN kernels fuse completely qualify (at most one unary; or a residual add of a
uint8 operand, set by int8_residual, optionally followed by relu), and only quantize consumers
with one set of parameters.

A SmoothQuant quantize (x * multiplier per channel, the multiplier holding 1/scale) cannot become
a per-tensor output scale. For a qlinear producer whose post-ops are at most one unary, the
multiplier becomes a `mul` post-op on that constant with output scale 1 instead: transformer FFNs
go qlinear+gelu -> uint8 -> qlinear without the bfloat16 tensor between them (12 of BERT-base's
14 remaining quantize nodes). The codes differ from the unfolded graph's only where it rounded
the gelu output to bfloat16 before quantizing.

Counts: requantize_folded.
"""
from __future__ import annotations

from ..ir import Program
from ..ir.postops import append_binary
from .base import PassOptions, register_pass
from .rewrite import absorb_readers, quantize_params, remove_nodes

_PRODUCERS = {"qlinear", "qconv2d"}
_FLOAT_OUTPUTS = {"float32", "bfloat16"}


def _multiplier_foldable(program: Program, node, multiplier: str) -> bool:
    """A qlinear with at most one unary post-op, and a constant multiplier, one value per output feature."""
    post_ops = node.attrs.get("post_ops", [])
    if node.op != "qlinear" or len(post_ops) > 1 or any(p.get("operand") is not None for p in post_ops):
        return False
    tensor, weight = program.weights.get(multiplier), program.weights.get(node.inputs[1])
    return tensor is not None and weight is not None and tensor.dim() == 1 and tensor.numel() == weight.shape[0]


def _fusable_post_ops(attrs: dict) -> bool:
    """At most one unary post-op (the oneDNN int8 kernels fuse every unary kind the IR has), or
    [add] / [add, relu] of a uint8 operand: oneDNN sums a uint8 accumulator into a uint8 output,
    but cannot requantize after a float one."""
    post_ops = attrs.get("post_ops", [])
    if len(post_ops) == 0 or (len(post_ops) == 1 and post_ops[0].get("operand") is None):
        return True
    return attrs.get("accum_scale") is not None and [p["kind"] for p in post_ops] in (["add"], ["add", "relu"])


@register_pass("fold_requantize", "int8 layers feeding only quantize nodes output uint8 directly")
def fold_requantize(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    users = graph.users()
    doomed: set[str] = set()
    for node in graph.nodes:
        if node.op not in _PRODUCERS or node.attrs.get("output_dtype") not in _FLOAT_OUTPUTS:
            continue
        if not _fusable_post_ops(node.attrs):
            continue
        y = node.outputs[0]
        readers = users.get(y, [])
        if not readers or y in graph.outputs or any(r.op != "quantize" for r in readers):
            continue
        params = {quantize_params(r) for r in readers}
        if len(params) != 1:
            continue
        (scale, zero_point, dtype, multipliers), = params
        if dtype != "uint8":
            continue
        if not multipliers:
            node.attrs = {**node.attrs, "output_dtype": dtype, "output_scale": scale, "output_zero_point": zero_point}
        elif _multiplier_foldable(program, node, multipliers[0]):
            append_binary(node, "mul", multipliers[0])
            node.attrs = {**node.attrs, "output_dtype": dtype, "output_scale": 1.0, "output_zero_point": zero_point}
        else:
            continue
        graph.values[y] = graph.values[y].with_(dtype=dtype)
        absorb_readers(graph, readers, y, doomed)
    if doomed:
        remove_nodes(program, doomed)
    return {"requantize_folded": len(doomed)}
