"""constant_fold: evaluate nodes whose inputs are all constants once, at conversion time.

The folded outputs become constants under their existing value names, so no reader
needs rewriting. Nodes whose result depends on a dynamic dim (an attribute naming
one, or a symbolic output shape) are left alone: their value changes per run.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from ..ir import Program, TensorSpec
from ..ir.dims import is_static
from ..ir.opdef import get_op
from .base import PassOptions, register_pass

# Folding may grow the artifact; an expand of a small constant should stay an op. A result with no more
# elements than its largest input (a dtype cast: a QDQ model's int8 weights dequantized) always folds.
MAX_GROWTH = 2
MAX_UNCHECKED_BYTES = 1 << 20


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _mentions_dim(value: Any, dim_pattern: re.Pattern | None) -> bool:
    """True if an attribute holds a symbolic size: a {"$sym": ...} argument or a dim expression."""
    if isinstance(value, dict):
        return "$sym" in value or any(_mentions_dim(v, dim_pattern) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_mentions_dim(v, dim_pattern) for v in value)
    if isinstance(value, str) and dim_pattern is not None:
        return dim_pattern.search(value) is not None
    return False


def _evaluate(op: str, attrs: dict, inputs: list) -> list[torch.Tensor] | None:
    """Run the node's reference; None when it cannot run here or does not give tensors."""
    try:
        fn = get_op(op).compile(get_op(op).parse_attrs(attrs))
        with torch.no_grad():
            result = fn(inputs, {})
    except Exception:  # an op that cannot run without real inputs simply stays an op
        return None
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(isinstance(r, torch.Tensor) for r in results):
        return None
    return results


@register_pass("constant_fold", "evaluate nodes whose inputs are all constants at conversion time")
def constant_fold(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    names = sorted(graph.dims, key=len, reverse=True)
    dim_pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
    outputs = set(graph.outputs)
    folded: set[str] = set()

    for node in graph.nodes:
        present = [i for i in node.inputs if i is not None]
        if not all(program.is_constant(i) for i in present):
            continue
        if any(o in outputs for o in node.outputs):
            continue  # outputs stay produced by a node (readers of the artifact expect that)
        if not all(is_static(graph.values[o].shape) for o in node.outputs) or _mentions_dim(node.attrs, dim_pattern):
            continue
        inputs = [None if i is None else program.weights[i] for i in node.inputs]
        results = _evaluate(node.op, node.attrs, inputs)
        if results is None or len(results) != len(node.outputs):
            continue
        in_bytes = sum(_nbytes(program.weights[i]) for i in set(present))
        out_bytes = sum(_nbytes(r) for r in results)
        widened_only = sum(r.numel() for r in results) <= max((program.weights[i].numel() for i in present), default=0)
        if out_bytes > MAX_GROWTH * in_bytes and out_bytes > MAX_UNCHECKED_BYTES and not widened_only:
            continue
        for name, tensor in zip(node.outputs, results):
            spec = TensorSpec.of(tensor)  # records channels_last if the op produced it
            # Own, dense storage: results may be views of (or expanded from) other weights.
            program.weights[name] = tensor.detach().clone(memory_format=torch.contiguous_format)
            graph.values[name] = spec
            if name not in graph.constants:
                graph.constants.append(name)
        folded.add(node.name)

    if folded:
        graph.nodes = [n for n in graph.nodes if n.name not in folded]
        program.prune()
    return {"nodes_folded": len(folded)}
