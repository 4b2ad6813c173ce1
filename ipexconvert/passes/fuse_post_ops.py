"""fuse_post_ops: fold element-wise consumers into a conv2d / linear / matmul's post_ops.

Unary consumers (relu, gelu, silu, sigmoid, tanh) become unary post-ops; add/mul
with another tensor become binary post-ops that read that tensor as an extra
input of the producer. Chains fold one step at a time (conv -> add -> relu gives
post_ops [add, relu]) because the producer takes over each consumer's output name.

The fused node keeps the producer's place in the (topologically ordered) node list,
so a binary operand must already exist there. For add(a, b) where both sides come
from fusable producers (a ResNet residual of two conv branches), the later producer
is the one that can take the other side as its operand.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Node, Program
from ..ir.dims import same
from ..ir.postops import BINARY_POST_OPS, UNARY_POST_OPS, PostOp
from .base import PassOptions, register_pass

_PRODUCERS = {"conv2d", "linear", "matmul"}
_UNARY = {"relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh"}
_GELU = {"none": "gelu", "tanh": "gelu_tanh"}


def _unary_kind(node: Node) -> Optional[str]:
    if node.op == "gelu":
        kind = _GELU.get(node.attrs.get("approximate", "none"))
    else:
        kind = _UNARY.get(node.op)
    return kind if kind in UNARY_POST_OPS else None


def _binary_kind(node: Node) -> Optional[str]:
    """add/mul of two tensors (a python-number operand has no post-op form)."""
    if node.op not in BINARY_POST_OPS or len(node.inputs) != 2 or None in node.inputs:
        return None
    if node.attrs.get("lhs_scalar") is not None or node.attrs.get("rhs_scalar") is not None:
        return None
    return node.op


def _broadcasts_into(operand: list, target: list) -> bool:
    """True if `operand` broadcasts to `target` without growing it."""
    if len(operand) > len(target):
        return False
    return all(o == 1 or same(o, t) for o, t in zip(operand[::-1], target[::-1]))


@register_pass("fuse_post_ops", "fold element-wise activations and residual adds into conv/linear/matmul")
def fuse_post_ops(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    values = graph.values
    outputs = set(graph.outputs)
    producer_of = graph.producers()
    users = graph.users()
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    doomed: set[int] = set()
    counts: dict[str, int] = {"post_ops_fused": 0}

    def fusable_producer(value: str) -> Optional[Node]:
        """The conv/linear/matmul writing `value`, if the consumer is its only reader."""
        node = producer_of.get(value)
        if node is None or node.op not in _PRODUCERS or len(node.outputs) != 1:
            return None
        if value in outputs or len(users.get(value, [])) != 1:
            return None
        return node

    def available_before(value: str, node: Node) -> bool:
        """Whether `value` exists when `node` runs: an input, a constant, or produced earlier."""
        source = producer_of.get(value)
        return source is None or position[id(source)] < position[id(node)]

    def fold(producer: Node, consumer: Node, post_op: PostOp) -> None:
        producer.attrs = {**producer.attrs, "post_ops": [*producer.attrs.get("post_ops", []), post_op.model_dump()]}
        # The producer now writes the consumer's value; readers of that name need no change.
        producer.outputs = list(consumer.outputs)
        producer_of[consumer.outputs[0]] = producer
        doomed.add(id(consumer))
        counts["post_ops_fused"] += 1
        counts[post_op.kind] = counts.get(post_op.kind, 0) + 1

    # Visit consumers in order, so a producer that absorbed one consumer is seen by the next.
    for consumer in graph.nodes:
        if len(consumer.outputs) != 1:
            continue
        out_spec = values[consumer.outputs[0]]

        kind = _unary_kind(consumer)
        if kind is not None:
            producer = fusable_producer(consumer.inputs[0])
            if producer is not None and values[consumer.inputs[0]].dtype == out_spec.dtype:
                fold(producer, consumer, PostOp(kind=kind))
            continue

        kind = _binary_kind(consumer)
        if kind is None:
            continue
        a, b = consumer.inputs
        candidates = []  # (producer, its output read here, the other operand)
        for main, other in ((a, b), (b, a)):
            producer = fusable_producer(main)
            if producer is None or main == other:
                continue
            main_spec, other_spec = values[main], values[other]
            # The post-op must not change the producer's dtype or shape.
            if main_spec.dtype != other_spec.dtype or main_spec.dtype != out_spec.dtype:
                continue
            if not _broadcasts_into(other_spec.shape, main_spec.shape):
                continue
            if not available_before(other, producer):
                continue
            candidates.append((producer, main, other))
        if not candidates:
            continue
        # Both sides fusable: take the later producer (the earlier one is then its operand).
        producer, main, other = max(candidates, key=lambda c: position[id(c[0])])
        producer.inputs = [*producer.inputs, other]
        fold(producer, consumer, PostOp(kind=kind, operand=len(producer.inputs) - 1))

    if doomed:
        graph.nodes = [n for n in graph.nodes if id(n) not in doomed]
        program.prune()
    return counts
