"""merge_shortcut_conv: a ResNet block's int8 projection shortcut joins the block's last 1x1 conv.

The first block of a ResNet stage ends in two 1x1 convolutions whose outputs are added: the
block's last conv A (over x, the main path) and the shortcut's projection D (over the block
input x0, subsampled by D's stride); int8_residual made D write uint8 for A's fused residual
sum. Both are linear, so

    A(x) + D(x0) = conv1x1(cat([x, x0[:, :, ::s, ::s]], channels), [W_A | W_D]) + b_A + b_D

one GEMM over the concatenated channels instead of two, and D's output is never written,
requantized and read back. The concat is an `aten.cat.default` node of x and the strided slices
of x0 (views), placed just before A; the native concat_channels kernel runs it. The first of
these nodes takes D's name, so the quantization plan's layer D still names a node (`inspect`).

The merged int8 weights share one scale per output channel, in the units of x's scale: per
channel the branch with the larger range keeps its int8 values exactly and the other is rounded
onto that grid. A layer merges only if that changes neither branch's weights by more than
MAX_WEIGHT_CHANGE (relative RMS); otherwise it stays two convs (`kept_apart`). The accuracy
guard judges the result, since it builds its candidates through this pass.

Measured (`python benchmarks/shortcut_merge.py`, ResNet-50's four projection blocks): at batch 16
the merged convs take 0.62-0.71 of the time; at batch 1, 1.04-1.06 (the concat costs what the
merged GEMM saves). bf16 convs (exact to merge) measured 0.87-0.97 at batch 16 and 1.04-1.05 at
batch 1, too little to carry the extra nodes, so float convs stay apart.

Pattern: A and D qconv2d, 1x1, groups 1, no padding or dilation, A with stride 1; A's post-ops
are [add(D's output)] or [add, relu] with a uint8 accumulator of D's output scale and zero
point; D has no post-ops, writes uint8 and is read by A alone; x and x0 uint8 with zero point 0
(ReLU outputs); constant weights and biases; equal output shapes.

Counts: merged, kept_apart.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..ir import Node, Program
from .base import PassOptions, register_pass

MAX_WEIGHT_CHANGE = 0.025  # relative RMS change of either branch's weights that a merge may cost
_SLICE_END = 2 ** 63 - 1  # torch's "to the end" for aten.slice
_BIAS = 3  # qconv2d inputs: x, weight, weight_scale, bias, then post-op operands


def _pointwise(node: Node) -> bool:
    """A qconv2d that is a plain 1x1 convolution over a uint8 input with zero point 0."""
    a = node.attrs
    return (node.op == "qconv2d" and a.get("groups", 1) == 1 and list(a.get("padding", [0, 0])) == [0, 0]
            and list(a.get("dilation", [1, 1])) == [1, 1] and a.get("x_zero_point", 0) == 0)


def _bias(node: Node) -> Optional[str]:
    return node.inputs[_BIAS] if len(node.inputs) > _BIAS else None


def _shortcut(program: Program, node: Node, producers: dict, users: dict) -> Optional[Node]:
    """The projection D that `node` (a block's last conv, A) can absorb, or None."""
    graph, a = program.graph, node.attrs
    post = a.get("post_ops", [])
    if (not _pointwise(node) or list(a.get("stride", [1, 1])) != [1, 1] or a.get("accum_scale") is None
            or not post or post[0]["kind"] != "add" or post[0].get("operand") is None
            or len(post) > 2 or (len(post) == 2 and post[1]["kind"] != "relu")):
        return None
    r = node.inputs[post[0]["operand"]]
    d = producers.get(r)
    if (d is None or not _pointwise(d) or d.attrs.get("post_ops") or r in graph.outputs
            or [u.name for u in users.get(r, [])] != [node.name] or len(d.inputs) > _BIAS + 1
            or d.attrs.get("output_dtype") != "uint8" or d.attrs.get("output_scale") != a["accum_scale"]
            or d.attrs.get("output_zero_point", 0) != a.get("accum_zero_point", 0)):
        return None
    x, x0, y = graph.values[node.inputs[0]], graph.values[d.inputs[0]], graph.values[node.outputs[0]]
    if (x.dtype != "uint8" or x0.dtype != "uint8" or x.rank != 4 or x0.rank != 4
            or graph.values[r].shape != y.shape):
        return None
    constants = [*node.inputs[1:_BIAS], *d.inputs[1:_BIAS], *(b for n in (node, d) if (b := _bias(n)) is not None)]
    return d if all(program.is_constant(v) for v in constants) else None


def _merged_weights(program: Program, a: Node, d: Node) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
    """(int8 weight [O, Ca + Cd, 1, 1], scales [O]) in units of A's input scale, or None if too lossy."""
    w = program.weights
    ratio = d.attrs["x_scale"] / a.attrs["x_scale"]  # D's input codes counted in A's input scale
    main = w[a.inputs[1]].float() * w[a.inputs[2]].view(-1, 1, 1, 1)
    side = w[d.inputs[1]].float() * (w[d.inputs[2]] * ratio).view(-1, 1, 1, 1)
    both = torch.cat([main, side], dim=1)
    scales = torch.clamp(both.flatten(1).abs().amax(dim=1) / 127.0, min=1e-12)
    q = torch.clamp(torch.round(both / scales.view(-1, 1, 1, 1)), -127, 127)
    back = q * scales.view(-1, 1, 1, 1)
    split = main.shape[1]
    for original, requantized in ((main, back[:, :split]), (side, back[:, split:])):
        if torch.linalg.vector_norm(requantized - original) > MAX_WEIGHT_CHANGE * torch.linalg.vector_norm(original):
            return None
    return q.to(torch.int8), scales.float()


def _merge(program: Program, a: Node, d: Node, weight: torch.Tensor, scales: torch.Tensor) -> list[Node]:
    """Nodes replacing A: the strided slices of x0, the concat, and A over it."""
    graph, w = program.graph, program.weights
    x, x0 = a.inputs[0], d.inputs[0]
    out = graph.values[a.outputs[0]]
    nodes, source = [], x0
    for axis, step in zip((2, 3), d.attrs.get("stride", [1, 1])):
        if step == 1:
            continue
        spec = graph.values[source]
        sliced = program.fresh_name(f"{x0}_every{step}")
        graph.values[sliced] = spec.with_(shape=[*spec.shape[:axis], out.shape[axis], *spec.shape[axis + 1:]])
        # The first new node takes D's name: the quantization plan and `inspect` know layers by node name.
        name = d.name if not nodes else program.fresh_name(f"{d.name}_subsample")
        nodes.append(Node(name=name, op="aten", inputs=[source], outputs=[sliced],
                          attrs={"target": "aten.slice.Tensor", "args": [{"$in": 0}, axis, 0, _SLICE_END, step]},
                          source=d.source))
        source = sliced
    joined = program.fresh_name(f"{x}_with_{x0}")
    channels = graph.values[x].shape[1] + graph.values[x0].shape[1]
    graph.values[joined] = graph.values[x].with_(shape=[out.shape[0], channels, *out.shape[2:]],
                                                 memory_format="channels_last")
    nodes.append(Node(name=program.fresh_name(f"{a.name}_concat") if nodes else d.name, op="aten", inputs=[x, source],
                      outputs=[joined],
                      attrs={"target": "aten.cat.default", "args": [[{"$in": 0}, {"$in": 1}], 1]}, source=a.source))

    biases = [w[b] for n in (a, d) if (b := _bias(n)) is not None]
    inputs = [joined, program.add_constant(f"{a.inputs[1]}_with_shortcut", weight),
              program.add_constant(f"{a.inputs[2]}_with_shortcut", scales),
              program.add_constant(f"{a.name}_bias_with_shortcut", sum(b.float() for b in biases)) if biases else None]
    attrs = {**a.attrs, "post_ops": a.attrs["post_ops"][1:], "accum_scale": None, "accum_zero_point": 0}
    nodes.append(Node(name=a.name, op="qconv2d", inputs=inputs, outputs=a.outputs, attrs=attrs, source=a.source))
    return nodes


@register_pass("merge_shortcut_conv", "a ResNet block's int8 1x1 shortcut conv joins its last 1x1 conv (one GEMM over both inputs)")
def merge_shortcut_conv(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers, users = graph.producers(), graph.users()
    replace: dict[str, list[Node]] = {}
    dropped: set[str] = set()
    counts = {"merged": 0, "kept_apart": 0}
    for node in graph.nodes:
        d = _shortcut(program, node, producers, users)
        if d is None:
            continue
        merged = _merged_weights(program, node, d)
        if merged is None:
            counts["kept_apart"] += 1
            continue
        replace[node.name] = _merge(program, node, d, *merged)
        dropped.add(d.name)
        counts["merged"] += 1
    if replace:
        graph.nodes = [m for n in graph.nodes if n.name not in dropped for m in replace.get(n.name, [n])]
        program.prune()
    return counts
