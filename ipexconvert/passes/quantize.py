"""quantize: linear / conv2d -> quantize + qlinear / qconv2d, as the quantization plan says.

The plan (built from calibration, see ipexconvert/quant) arrives in
PassOptions.quantization. Each quantized layer reads its input through a
quantize node (one per input value and parameters, so Q, K and V share one), stores its
int8 weight, per-channel scales and float32 bias, and keeps its post-ops and output dtype.
Layers the plan leaves float (fallback) are untouched.

Counts: linear_quantized, conv2d_quantized, quantize_inserted, left_float.
"""
from __future__ import annotations

from ..ir import Node, Program
from ..ir.postops import shift_operands
from .base import PassOptions, register_pass

_QUANTIZED_OP = {"linear": "qlinear", "conv2d": "qconv2d"}
_CONV_ATTRS = ("stride", "padding", "dilation", "groups")


@register_pass("quantize", "int8 linear/conv2d with quantized inputs, from the calibration plan")
def quantize(program: Program, options: PassOptions) -> dict[str, int]:
    quantization = options.quantization
    counts = {"linear_quantized": 0, "conv2d_quantized": 0, "quantize_inserted": 0, "left_float": 0}
    if quantization is None:
        return counts
    graph = program.graph
    plan, tensors = quantization.plan, quantization.tensors
    quantized_inputs: dict[tuple, str] = {}  # (value, scale, zero point, dtype, multiplier id) -> uint8 value
    new_nodes: list[Node] = []
    for node in graph.nodes:
        layer = plan.layers.get(node.name)
        if layer is None or node.op not in _QUANTIZED_OP:
            new_nodes.append(node)
            continue
        if not layer.quantized:
            counts["left_float"] += 1
            new_nodes.append(node)
            continue
        t, act = tensors[node.name], layer.input
        x = node.inputs[0]
        key = (x, act.scale, act.zero_point, act.dtype, None if t.multiplier is None else id(t.multiplier))
        if key not in quantized_inputs:
            inputs = [x]
            if t.multiplier is not None:
                inputs.append(program.add_constant(f"{node.name}_smooth_multiplier", t.multiplier))
            out = program.fresh_name(f"{x}_q")
            graph.values[out] = graph.values[x].with_(dtype=act.dtype)
            new_nodes.append(Node(name=program.fresh_name(f"quantize_{x}"), op="quantize", inputs=inputs,
                                  outputs=[out], attrs={"scale": act.scale, "zero_point": act.zero_point,
                                                        "dtype": act.dtype}, source=node.source))
            quantized_inputs[key] = out
            counts["quantize_inserted"] += 1
        weight = program.add_constant(f"{node.name}_weight_int8", t.weight)
        scale = program.add_constant(f"{node.name}_weight_scale", t.weight_scale)
        bias = None if t.bias is None else program.add_constant(f"{node.name}_bias_fp32", t.bias)
        attrs = {k: node.attrs[k] for k in _CONV_ATTRS if k in node.attrs}
        # The int8 ops take one more input (weight scales) before the post-op operands.
        post_ops = shift_operands(node.attrs.get("post_ops", []), 1)
        attrs.update(x_scale=act.scale, x_zero_point=act.zero_point, post_ops=post_ops,
                     output_dtype=graph.values[node.outputs[0]].dtype)
        counts[f"{node.op}_quantized"] += 1
        node.op = _QUANTIZED_OP[node.op]
        node.inputs = [quantized_inputs[key], weight, scale, bias, *node.inputs[3:]]
        node.attrs = attrs
        new_nodes.append(node)
    graph.nodes = new_nodes
    program.prune()
    return counts
