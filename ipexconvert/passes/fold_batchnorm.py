"""fold_batchnorm: fold an inference batch_norm into the conv2d / linear that feeds it.

batch_norm(conv(x, W, b)) == conv(x, W * s, b * s + t) with s = gamma / sqrt(var + eps)
and t = beta - mean * s, per output channel. The BN node disappears.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..ir import Node, Program, TensorSpec
from .base import PassOptions, register_pass
from .rewrite import single_user


def _bn_scale_shift(program: Program, bn: Node) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
    """Per-channel (scale, shift) in float64, or None if a BN parameter is not a constant."""
    _, gamma, beta, mean, var = bn.inputs
    if not all(v is None or program.is_constant(v) for v in (gamma, beta)):
        return None
    if not (program.is_constant(mean) and program.is_constant(var)):
        return None
    eps = float(bn.attrs.get("eps", 1e-5))
    mean64, var64 = program.weights[mean].double(), program.weights[var].double()
    scale = torch.rsqrt(var64 + eps)
    if gamma is not None:
        scale = scale * program.weights[gamma].double()
    shift = -mean64 * scale
    if beta is not None:
        shift = shift + program.weights[beta].double()
    return scale, shift


def _producer_ok(program: Program, producer: Node, channels: int) -> bool:
    graph = program.graph
    if producer.op not in ("conv2d", "linear") or producer.attrs.get("post_ops"):
        return False
    weight, bias = producer.inputs[1], producer.inputs[2] if len(producer.inputs) > 2 else None
    if not program.is_constant(weight) or not (bias is None or program.is_constant(bias)):
        return False
    out_spec = graph.values[producer.outputs[0]]
    if producer.op == "linear" and out_spec.rank != 2:
        return False  # BatchNorm1d on [N, L, C] normalises dim 1 (L), not the linear's features
    w = program.weights[weight]
    if not w.is_floating_point() or w.shape[0] != channels:
        return False
    return True


def _store(program: Program, name: Optional[str], tensor: torch.Tensor, only_reader: bool, base: str) -> str:
    """Write a folded tensor: in place when this node is its only reader, else as a new constant."""
    if name is not None and only_reader:
        old = program.graph.values[name]
        program.weights[name] = tensor
        program.graph.values[name] = TensorSpec.of(tensor).with_(memory_format=old.memory_format)
        return name
    return program.add_constant(base, tensor)


@register_pass("fold_batchnorm", "fold inference batch_norm into the preceding conv2d or linear")
def fold_batchnorm(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers = graph.producers()
    users = graph.users()
    doomed: set[str] = set()

    for bn in graph.nodes:
        if bn.op != "batch_norm":
            continue
        producer = producers.get(bn.inputs[0])
        if producer is None or single_user(graph, bn.inputs[0], users) is not bn:
            continue  # the un-normalised value is needed elsewhere too
        stats = _bn_scale_shift(program, bn)
        if stats is None or not _producer_ok(program, producer, stats[0].shape[0]):
            continue
        scale, shift = stats
        weight = producer.inputs[1]
        bias = producer.inputs[2] if len(producer.inputs) > 2 else None
        w = program.weights[weight]
        view = [-1] + [1] * (w.dim() - 1)  # broadcast over the output-channel axis
        new_w = (w.double() * scale.reshape(view)).to(w.dtype)
        old_b = program.weights[bias].double() if bias is not None else torch.zeros_like(shift)
        new_b = (old_b * scale + shift).to(w.dtype)

        producer.inputs = list(producer.inputs) + [None] * (3 - len(producer.inputs))
        producer.inputs[1] = _store(program, weight, new_w, len(users.get(weight, [])) == 1, weight)
        bias_base = weight.removesuffix("weight") + "bias" if weight.endswith("weight") else f"{weight}_bias"
        producer.inputs[2] = _store(program, bias, new_b, bias is not None and len(users.get(bias, [])) == 1, bias_base)
        # The producer now writes the BN's output name, so BN readers (and graph outputs) need no rewrite.
        bn_out = bn.outputs[0]
        graph.values[bn_out] = graph.values[bn_out].with_(memory_format=graph.values[producer.outputs[0]].memory_format)
        producer.outputs = [bn_out]
        doomed.add(bn.name)

    if doomed:
        graph.nodes = [n for n in graph.nodes if n.name not in doomed]
        program.prune()
    return {"batchnorm_folded": len(doomed)}
