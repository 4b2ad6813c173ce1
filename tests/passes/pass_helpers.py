"""Shared helpers for the pass tests: copy a program, run it, compare outputs."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.ir import Program
from ipexconvert.runtime.executor import Executor

TOL = 1e-5  # fp32: max|a-b| / max|b|


def copy_program(program: Program) -> Program:
    return Program(program.graph.model_copy(deep=True), dict(program.weights))


def run_program(program: Program, inputs: dict[str, torch.Tensor], dims: dict[str, int],
                widen_bf16: bool | None = None) -> list[torch.Tensor]:
    return Executor(program, widen_bf16=widen_bf16).run([inputs[n] for n in program.graph.inputs], dims)


def run_traced(program: Program, inputs: dict[str, torch.Tensor], dims: dict[str, int]):
    """Outputs plus every value any node produced during the run, by value name (bf16 runs as
    bf16 even where the CPU would compute it in float32, so the specs can be checked)."""
    executor = Executor(program, widen_bf16=False)
    seen: dict[str, torch.Tensor] = {}
    outputs_of = {n.name: n.outputs for n in program.graph.nodes}
    for step in executor.steps:
        def record(ins, d, kernel=step.kernel, names=outputs_of[step.node]):
            result = kernel(ins, d)
            seen.update(zip(names, result if isinstance(result, (tuple, list)) else [result]))
            return result
        step.kernel = record
    return executor.run([inputs[n] for n in program.graph.inputs], dims), seen


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-12)).item()


def assert_same_outputs(before: Program, after: Program, inputs: dict[str, torch.Tensor], dims: dict[str, int]) -> None:
    """Same count, shapes and dtypes of outputs, and values within TOL."""
    for e, g in zip(run_program(before, inputs, dims), run_program(after, inputs, dims), strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert rel_err(g, e) < TOL


# torch.export of transformers' Llama (the tiny-llama example) needs torch >= 2.13 (see docs/architecture.md)
NEEDS_LLAMA_EXPORT = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                        reason="torch.export of transformers' Llama needs torch >= 2.13 "
                                               "(see docs/architecture.md)")


def tiny_llama_fp32_program():
    """(the tiny-llama example's module, its program after the fp32 pipeline's passes but prepack)."""
    from ipexconvert.examples import get_example
    from ipexconvert.frontend.torch.export import program_from_module
    from ipexconvert.passes.base import PASSES, PassOptions
    from ipexconvert.passes.pipeline import pipeline_for

    example = get_example("tiny-llama")
    module = example.build()
    program = program_from_module(module, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    for name in pipeline_for("fp32"):
        if name != "prepack":
            PASSES[name].run(program, PassOptions())
    return module, program


def tiny_llama_with_cache_pass(name: str):
    """(module, the fp32 program, a copy after the cache pass `name`, the cache inputs and outputs' names); the pass
    changed the 4 caches (k and v of 2 layers)."""
    from ipexconvert.passes.base import PASSES, PassOptions

    module, before = tiny_llama_fp32_program()
    after = copy_program(before)
    assert PASSES[name].run(after, PassOptions())["cache_tensors"] == 4
    graph = after.graph
    caches = [n for n in graph.inputs if n.startswith("past_")] + [n for n in graph.outputs if n.startswith("present_")]
    return module, before, after, caches
