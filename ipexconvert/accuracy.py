"""Artifact vs eager: error metrics and the default budget per dtype."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from .manifest import AccuracyRecord, OutputAccuracy

# (max relative error, min cosine similarity) allowed at conversion, per dtype.
DEFAULT_BUDGETS: dict[str, tuple[float, float]] = {
    "fp32": (1e-3, 0.99999),
    "bf16": (0.1, 0.99),
    "int8": (0.25, 0.98),
}


def compare_output(name: str, got: torch.Tensor, want: torch.Tensor) -> OutputAccuracy:
    g, w = got.detach().double().flatten(), want.detach().double().flatten()
    diff = (g - w).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(w.abs().max()) if w.numel() else 0.0
    rel = max_abs / scale if scale > 0 else max_abs
    norms = float(g.norm() * w.norm())
    cosine = float(torch.dot(g, w) / norms) if norms > 0 else (1.0 if max_abs == 0 else 0.0)
    cosine = max(-1.0, min(1.0, cosine))  # rounding can push it a hair past 1
    return OutputAccuracy(name=name, max_abs_error=max_abs, max_rel_error=rel, cosine=cosine)


def measure(names: Sequence[str], got: Sequence[torch.Tensor], want: Sequence[torch.Tensor], dtype: str,
            reference: str, max_rel_error: Optional[float] = None, min_cosine: Optional[float] = None) -> AccuracyRecord:
    default_rel, default_cos = DEFAULT_BUDGETS[dtype]
    rel_budget = default_rel if max_rel_error is None else max_rel_error
    cos_budget = default_cos if min_cosine is None else min_cosine
    outputs = []
    for name, g, w in zip(names, got, want):
        if g.shape != w.shape:
            raise ValueError(f"output {name}: artifact shape {tuple(g.shape)} != eager shape {tuple(w.shape)}")
        outputs.append(compare_output(name, g, w))
    passed = all(o.max_rel_error <= rel_budget and o.cosine >= cos_budget for o in outputs)
    return AccuracyRecord(reference=reference, dtype=dtype, budget_rel_error=rel_budget, budget_min_cosine=cos_budget,
                          passed=passed, outputs=outputs)


def flatten_outputs(value) -> list[torch.Tensor]:
    """Eager outputs as a flat list of tensors (tuples, lists, dicts, HF ModelOutputs)."""
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
