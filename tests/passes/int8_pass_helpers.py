"""Shared helpers for the int8 pass tests: a calibrated plan for a small module, the quantize pass, numerics."""
from __future__ import annotations

import copy

import torch
from torch import nn

from ipexconvert.frontend.dynamic import DynamicDim
from ipexconvert.frontend.export import program_from_module
from ipexconvert.ir import Node, Program
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.base import PASSES
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.quant.options import QuantOptions
from ipexconvert.quant.plan import Quantization
from ipexconvert.quant.planner import plan_quantization
from pass_helpers import rel_err, run_program

INT8_TOL = 0.05  # max|int8 - fp32| / max|fp32| for these small, well-scaled models


def planned(module: nn.Module, shape: tuple, options=QuantOptions(smoothquant="off")) -> tuple[Program, Quantization, list]:
    """Float passes, then the planner: (the planned float program, its quantization, the calibration batches)."""
    g = torch.Generator().manual_seed(0)
    data = [{"x": torch.randn(*shape, generator=g)} for _ in range(3)]
    program = program_from_module(module.eval(), data[0], {"x": {0: DynamicDim(name="batch", max=8)}})
    names = PIPELINES["int8"]
    run_pipeline(program, names[:names.index("to_bf16")], PassOptions(dtype="int8"))
    return program, plan_quantization(program, data, data[:1], options), data


def quantized(program: Program, quantization: Quantization) -> tuple[Program, dict]:
    """A copy of `program` after the quantize pass, and the pass's counts."""
    program = copy.deepcopy(program)
    return program, PASSES["quantize"].run(program, PassOptions(dtype="int8", params={"quantization": quantization}))


def by_weight(program: Program, prefix: str) -> Node:
    """The float linear/conv2d node whose weight is the module attribute `prefix`'s."""
    (node,) = [n for n in program.graph.nodes if n.op in ("linear", "conv2d") and n.inputs[1].startswith(f"{prefix}.weight")]
    return node


def assert_close(after: Program, before: Program, data: list, tol: float = INT8_TOL) -> None:
    """Same outputs (count, shape, dtype) within tol, on every batch, with the real executor."""
    for batch in data:
        for got, want in zip(run_program(after, batch, {"batch": 2}), run_program(before, batch, {"batch": 2}), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert rel_err(got, want) < tol
