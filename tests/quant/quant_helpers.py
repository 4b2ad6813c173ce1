"""Shared helpers for the quantization tests: float programs as the planner sees them, and batches."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Node, Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.pipeline import PIPELINES, QUANTIZATION_STAGE

BATCH = {0: DynamicDim(name="batch", max=16)}


def float_program(module: nn.Module, example: dict[str, torch.Tensor]) -> Program:
    """The module through the real frontend and the int8 pipeline's float passes (what plan_quantization gets)."""
    program = program_from_module(module.eval(), example, {name: BATCH for name in example})
    names = PIPELINES["cpu", "int8"]
    cut = min(names.index(n) for n in QUANTIZATION_STAGE)
    run_pipeline(program, names[:cut], PassOptions(dtype="int8"))
    return program


def batches(shape: tuple[int, ...], n: int, seed: int = 0, name: str = "x",
            outliers: Optional[dict[int, float]] = None) -> list[dict[str, torch.Tensor]]:
    """n random batches; `outliers` scales chosen last-axis channels (channel -> factor)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(*shape, generator=g)
        for c, factor in (outliers or {}).items():
            x[..., c] *= factor
        out.append({name: x})
    return out


def node_reading_weight(program: Program, weight_prefix: str) -> Node:
    """The linear/conv2d whose weight constant came from the module parameter `weight_prefix`.weight."""
    found = [n for n in program.graph.nodes if n.op in ("linear", "conv2d", "qlinear", "qconv2d")
             and n.inputs[1] is not None and n.inputs[1].startswith(f"{weight_prefix}.weight")]
    assert len(found) == 1, f"{weight_prefix}: {[n.name for n in found]}"
    return found[0]


def max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max|a - b| / max|b|."""
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-12))
