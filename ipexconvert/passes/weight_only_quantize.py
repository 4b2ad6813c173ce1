"""weight_only_quantize: linear layers with a constant 2-D weight become woq_linear (int4 or int8 weights).

Weight-only quantization (--dtype int4, or int8 with int8_scheme "weight-only") stores each linear's
weight as codes plus scales (and zero points) rounded to nearest (quant/weight_only.py), or, for a weight
PassOptions.weight_codes names (--woq-algorithm gptq / awq: quant/weight_only_inc.py chose them before the
passes, with calibration text), those codes; activations stay float. Decoders are bound by reading their weights at small batch,
so 4x / 8x fewer weight bytes is the speed-up. Bits come from the dtype (int4: 4, else 8), the
group size and symmetry from PassOptions.weight_only (defaults: int4 groups of 128, symmetric; int8
one scale per output channel).

Kept float, each counted under its reason:
- the LM head, unless weight_only.quantize_lm_head: a linear whose output reaches a graph output
  through shape and dtype changes only, or whose weight an embedding also reads (tied embeddings);
  its error lands directly on the logits, and a tied table would be stored twice;
- a layer whose in_features the group size does not divide, whose weight is not finite, or whose
  bias is not a constant; an input that is not float32/bfloat16;
- a layer named in PassOptions.keep_float: the accuracy guard moved it back (quant/weight_only_guard.py).

Post-ops stay on the node (their operand slots move by 2: woq_linear has 5 inputs of its own).
Counts: quantized (from_codes of them took PassOptions.weight_codes, the rest were rounded to nearest),
float_lm_head, float_group_size, float_accuracy_guard, float_other.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..ir import Node, Program
from ..ir.postops import shift_operands
from ..quant.options import WeightOnlyOptions
from ..quant.weight_only import QuantizedWeight, quantize_weight, unsupported_reason
from .base import PassOptions, register_pass

_FLOATS = ("float32", "bfloat16")
# Ops that only reshape, slice or cast a value: an LM head's logits may pass through them to the output.
_PASS_THROUGH = {"to_dtype", "reshape", "flatten", "permute", "identity", "to_memory_format"}
_PASS_THROUGH_ATEN = ("aten.slice.", "aten.view.", "aten._unsafe_view.", "aten.squeeze.", "aten.unsqueeze.",
                      "aten.select.", "aten.alias.", "aten.expand.", "aten.clone.", "aten.contiguous.")


def bits_for(dtype: str) -> int:
    return 4 if dtype == "int4" else 8


def _reaches_output(value: str, users: dict[str, list[Node]], outputs: set[str]) -> bool:
    """Whether `value`, or something only reshaped / sliced / cast from it, is a graph output."""
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        if v in outputs:
            return True
        if v in seen:
            continue
        seen.add(v)
        for node in users.get(v, []):
            passes = node.op in _PASS_THROUGH or (
                node.op == "aten" and str(node.attrs.get("target", "")).startswith(_PASS_THROUGH_ATEN))
            if passes and node.inputs and node.inputs[0] == v:
                todo.extend(node.outputs)
    return False


def is_lm_head(program: Program, node: Node, users: dict[str, list[Node]]) -> bool:
    """A linear whose output is (a view or cast of) a graph output, or whose weight an embedding reads too."""
    tied = any(u.op == "embedding" for u in users.get(node.inputs[1], []))
    return tied or _reaches_output(node.outputs[0], users, set(program.graph.outputs))


def _float_reason(program: Program, node: Node) -> Optional[str]:
    """Why a linear cannot become a woq_linear at all (None: it can)."""
    values = program.graph.values
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if len(node.outputs) != 1 or x is None or not program.is_constant(w) or values[w].rank != 2:
        return "other"
    if values[x].dtype not in _FLOATS or (bias is not None and not program.is_constant(bias)):
        return "other"
    return None


def _given_codes(options: PassOptions, weight: str, shape: tuple[int, ...], bits: int, group_size: int,
                 symmetric: bool) -> Optional[QuantizedWeight]:
    """The codes PassOptions.weight_codes holds for `weight`, checked against what this pass would make of it."""
    q = options.weight_codes.get(weight) if options.weight_codes is not None else None
    if q is None:
        return None
    n, k = shape
    packed = k // 2 if bits == 4 else k
    if (q.bits, q.group_size, q.zero_points is None) != (bits, group_size, symmetric) or \
            tuple(q.codes.shape) != (n, packed) or tuple(q.scales.shape) != (n, k // group_size):
        raise ValueError(f"the codes given for {weight} (int{q.bits}, groups of {q.group_size}, codes "
                         f"{tuple(q.codes.shape)}) do not fit its {n}x{k} weight as int{bits} in groups of {group_size}")
    return q


@register_pass("weight_only_quantize", "linears with constant weights -> woq_linear (int4 / int8 weights, "
               "round to nearest or the GPTQ / AWQ codes given); the LM head stays float unless asked")
def weight_only_quantize(program: Program, options: PassOptions) -> dict[str, int]:
    settings = options.weight_only or WeightOnlyOptions()
    bits = bits_for(options.dtype)
    graph = program.graph
    users = graph.users()
    counts = {"quantized": 0, "from_codes": 0, "float_lm_head": 0, "float_group_size": 0, "float_accuracy_guard": 0, "float_other": 0}
    for node in graph.nodes:
        if node.op != "linear":
            continue
        if _float_reason(program, node) is not None:
            counts["float_other"] += 1
            continue
        if not settings.quantize_lm_head and is_lm_head(program, node, users):
            counts["float_lm_head"] += 1
            continue
        if node.name in options.keep_float:
            counts["float_accuracy_guard"] += 1
            continue
        weight = program.weights[node.inputs[1]]
        group_size = settings.resolved_group_size(bits, weight.shape[1])
        reason = unsupported_reason(weight, bits, group_size)
        if reason is not None:
            counts["float_group_size" if "group size" in reason else "float_other"] += 1
            continue
        symmetric = settings.symmetric or bits == 8
        q = _given_codes(options, node.inputs[1], tuple(weight.shape), bits, group_size, symmetric)
        counts["from_codes"] += q is not None
        if q is None:
            q = quantize_weight(weight, bits, group_size, symmetric=symmetric)
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        name = node.name
        inputs = [node.inputs[0],
                  program.add_constant(f"{name}_codes_int{bits}", q.codes),
                  program.add_constant(f"{name}_scales", q.scales),
                  None if q.zero_points is None else program.add_constant(f"{name}_zero_points", q.zero_points),
                  None if bias is None else program.add_constant(f"{name}_bias_fp32",
                                                                 program.weights[bias].to(torch.float32)),
                  *node.inputs[3:]]
        node.op = "woq_linear"
        node.inputs = inputs
        node.attrs = {"bits": bits, "group_size": group_size,
                      "post_ops": shift_operands(node.attrs.get("post_ops", []), 2)}  # 5 own inputs, not 3
        if settings.activations == "int8":
            node.attrs["activations"] = "int8"
        counts["quantized"] += 1
    program.prune()  # the float weights, unless something else reads them (a tied embedding)
    return counts
