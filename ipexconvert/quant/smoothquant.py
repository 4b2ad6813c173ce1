"""SmoothQuant: move activation outliers into the weights before quantizing transformer linears.

For linears sharing an input x [.., C], factors s[c] = max|x[:, c]|^alpha / max|W[:, c]|^(1-alpha)
make x / s easy to quantize per tensor while W * s (columns) stays easy per channel; the
product is unchanged in exact arithmetic. 1/s must be applied to x without an extra op:
- folded into the producing layer_norm / rms_norm / add_layer_norm (its weight and bias
  divided by s) when the group's linears are the only readers of x;
- otherwise folded into the quantize node the int8 linear reads through anyway, as a
  per-channel multiplier (post-norm BERT feeds the same x to the residual add, which must
  see the unscaled value).
`auto` picks alpha per group by the error of the fake-quantized group output on sampled rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ..ir import Node, Program
from .observers import qparams_from_range

FACTOR_RANGE = (1e-5, 1e5)  # keeps a dead channel (max 0) from producing 0 or inf
_NORMS = {"layer_norm": (1, 2), "rms_norm": (1, None), "add_layer_norm": (2, 3)}  # weight, bias input slots


@dataclass
class SmoothGroup:
    """Linears reading one activation value, and where 1/s can be folded."""

    value: str
    linears: list[Node]
    norm: Optional[Node] = None  # the producer absorbing 1/s, or None: the quantize multiplier
    absmax: Optional[torch.Tensor] = None  # per input channel, over calibration
    samples: list[torch.Tensor] = field(default_factory=list)  # sampled rows [r, C]

    def observe(self, x: torch.Tensor, rows: int) -> None:
        flat = x.detach().float().reshape(-1, x.shape[-1])
        amax = flat.abs().amax(dim=0)
        self.absmax = amax if self.absmax is None else torch.maximum(self.absmax, amax)
        pick = torch.randperm(flat.shape[0], generator=torch.Generator().manual_seed(len(self.samples)))[:rows]
        self.samples.append(flat[pick].clone())


def find_groups(program: Program, linears: list[Node]) -> list[SmoothGroup]:
    """Group the quantizable linears by input value; mark the norms that can absorb 1/s."""
    graph = program.graph
    by_value: dict[str, list[Node]] = {}
    for node in linears:
        by_value.setdefault(node.inputs[0], []).append(node)
    producers, users = graph.producers(), graph.users()
    groups = []
    for value, members in by_value.items():
        producer = producers.get(value)
        norm = None
        if (producer is not None and producer.op in _NORMS and producer.outputs[0] == value
                and value not in graph.outputs and len(users.get(value, [])) == len(members)
                and program.is_constant(producer.inputs[_NORMS[producer.op][0]])):
            norm = producer
        groups.append(SmoothGroup(value, members, norm))
    return groups


def factors(absmax: torch.Tensor, weights: list[torch.Tensor], alpha: float) -> torch.Tensor:
    w_absmax = torch.stack([w.float().abs().amax(dim=0) for w in weights]).amax(dim=0)
    s = absmax.clamp_min(1e-8).pow(alpha) / w_absmax.clamp_min(1e-8).pow(1 - alpha)
    s = torch.where(absmax > 0, s, torch.ones_like(s))  # a channel never active: leave it alone
    return s.clamp(*FACTOR_RANGE)


def _fake_quant_rows(x: torch.Tensor, dtype: str) -> torch.Tensor:
    scale, zp = qparams_from_range(min(float(x.min()), 0.0), max(float(x.max()), 0.0), dtype)
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return (torch.clamp(torch.round(x / scale) + zp, lo, hi) - zp) * scale


def _fake_quant_weight(w: torch.Tensor) -> torch.Tensor:
    scale = (w.abs().amax(dim=1, keepdim=True) / 127).clamp_min(1e-12)
    return torch.clamp(torch.round(w / scale), -127, 127) * scale


def group_error(x: torch.Tensor, weights: list[torch.Tensor], s: Optional[torch.Tensor], dtype: str) -> float:
    """Relative error of the group's fake-quantized output on sampled rows x (s None: no smoothing)."""
    w = torch.cat([t.float() for t in weights])
    want = x @ w.t()
    xs, ws = (x, w) if s is None else (x / s, w * s)
    got = _fake_quant_rows(xs, dtype) @ _fake_quant_weight(ws).t()
    return float((got - want).norm() / want.norm().clamp_min(1e-12))


def choose_alpha(group: SmoothGroup, weights: list[torch.Tensor], setting, grid, dtype: str) -> tuple[float, dict]:
    """(alpha, errors by alpha) for `auto`; the fixed alpha otherwise."""
    if setting != "auto":
        return float(setting), {}
    x = torch.cat(group.samples)
    errors = {a: group_error(x, weights, factors(group.absmax, weights, a), dtype) for a in grid}
    return min(errors, key=errors.get), errors


def fold_into_norm(program: Program, norm: Node, s: torch.Tensor) -> None:
    """norm(x) / s: divide the norm's weight (and bias) by s, as new constants (others may share them)."""
    w_slot, b_slot = _NORMS[norm.op]
    for slot in (w_slot, b_slot):
        if slot is None or slot >= len(norm.inputs) or norm.inputs[slot] is None:
            continue
        old = norm.inputs[slot]
        tensor = program.weights[old]
        norm.inputs[slot] = program.add_constant(f"{old}_smoothed", (tensor.float() / s).to(tensor.dtype))
