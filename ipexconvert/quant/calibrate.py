"""Run a float program on calibration batches and hand chosen values to callbacks ("taps").

This interprets the graph with each op's reference implementation (the correctness
oracle), not the optimized kernels: calibration must see the float model's true
activations. Values are freed after their last use, so memory stays at one forward pass.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch

from ..ir import Program
from ..ir.opdef import get_op

Tap = Callable[[torch.Tensor], None]


def bind_dims(program: Program, batch: dict[str, torch.Tensor]) -> dict[str, int]:
    """Dynamic dim sizes from the batch (input dims that are plain dim names)."""
    dims: dict[str, int] = {}
    for name in program.graph.inputs:
        for d, size in zip(program.graph.values[name].shape, batch[name].shape):
            if isinstance(d, str) and d in program.graph.dims:
                dims[d] = int(size)
    return dims


def run_with_taps(program: Program, batches: Iterable[dict[str, torch.Tensor]], taps: dict[str, list[Tap]],
                  on_batch: Optional[Callable[[], None]] = None) -> None:
    """Forward every batch; after a tapped value is computed, call its taps with it."""
    graph = program.graph
    compiled = [(node, get_op(node.op).compile(get_op(node.op).parse_attrs(node.attrs))) for node in graph.nodes]
    last_use: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            if v is not None:
                last_use[v] = i
    with torch.inference_mode():
        for batch in batches:
            env: dict[str, torch.Tensor] = dict(program.weights)
            env.update({n: batch[n] for n in graph.inputs})
            dims = bind_dims(program, batch)
            for name in graph.inputs:
                for tap in taps.get(name, ()):
                    tap(env[name])
            for i, (node, fn) in enumerate(compiled):
                result = fn([None if v is None else env[v] for v in node.inputs], dims)
                results = [result] if len(node.outputs) == 1 else list(result)
                for out, value in zip(node.outputs, results):
                    env[out] = value
                    for tap in taps.get(out, ()):
                        tap(value)
                for v in node.inputs:
                    if v is not None and last_use.get(v) == i and v not in program.weights:
                        env.pop(v, None)
            if on_batch:
                on_batch()


def outputs_of(program: Program, batch: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The program's outputs on one batch (reference ops)."""
    got: dict[str, torch.Tensor] = {}
    taps = {name: [lambda t, name=name: got.__setitem__(name, t)] for name in program.graph.outputs}
    run_with_taps(program, [batch], taps)
    return [got[n] if n in got else batch[n] for n in program.graph.outputs]
