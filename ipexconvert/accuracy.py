"""Artifact vs eager: error metrics and the default budget per dtype.

Every output gets the element-wise numbers (max absolute / relative error, cosine of the whole
tensor) and the per-sample ones (cosine of each sample along dim 0, top-1 agreement of
[batch, classes] outputs, nearest-neighbour agreement of [batch, dim] embeddings). What decides
depends on the dtype:
- fp32 must reproduce eager numerically: max relative error and cosine;
- bf16, int8 and int4 are approximations, judged by what a user of the output sees: every sample's
  cosine (an embedding's direction, a logit vector's shape). One element's relative error is
  recorded, not judged (an int8 MiniLM at 0.998 cosine has single elements 28% off), unless the
  caller sets max_rel_error. int4 (weight-only, 4-bit weights) gets a wider cosine budget than int8:
  a decoder's logits after round-to-nearest int4 lose more (the tiny Llama example: 0.98); weight-only
  int8 artifacts are recorded as int8 and held to its budget, which they clear easily (0.9999).
A weight-only decoder (int4, weight-only int8) is judged teacher-forced instead (decoder_accuracy.py); what
is measured here on its example inputs is recorded.
"""
from __future__ import annotations

import math

from typing import Optional, Sequence

import torch

from .ir import dtypes
from .ir.ops._kv_int8 import dequantize_rows, quantize_rows
from .manifest import AccuracyRecord, OutputAccuracy

# (max relative error, min cosine similarity) allowed at conversion, per dtype.
DEFAULT_BUDGETS: dict[str, tuple[float, float]] = {
    "fp32": (1e-3, 0.99999),
    "bf16": (0.1, 0.99),
    "int8": (0.25, 0.98),
    "int4": (0.5, 0.95),
}
ELEMENTWISE = "max relative error and cosine"
PER_SAMPLE = "every sample's cosine"


def _clamp_cosine(value: float) -> float:
    return max(-1.0, min(1.0, value))  # rounding can push it a hair past 1


def _sample_cosines(g: torch.Tensor, w: torch.Tensor) -> Optional[torch.Tensor]:
    """Cosine of each sample (dim 0) of two outputs of rank >= 2, as float64; None otherwise."""
    if g.dim() < 2 or g.shape[0] == 0 or g[0].numel() == 0:
        return None
    g, w = g.reshape(g.shape[0], -1), w.reshape(w.shape[0], -1)
    dots, norms = (g * w).sum(1), g.norm(dim=1) * w.norm(dim=1)
    same = (g == w).all(dim=1)  # two zero vectors agree perfectly
    return torch.where(norms > 0, dots / norms.clamp_min(1e-300), same.double())


NEIGHBOUR_ROWS = 2048  # rows nearest_neighbours compares at most (a square matrix of them: 32 MiB)


def nearest_neighbours(x: torch.Tensor) -> torch.Tensor:
    """Each row's nearest other row by cosine, among the first NEIGHBOUR_ROWS rows (for those rows only: a model with
    a batch of 100,000 outputs would otherwise make a 80 GB matrix)."""
    unit = torch.nn.functional.normalize(x[:NEIGHBOUR_ROWS], dim=1)
    similarity = unit @ unit.T
    similarity.fill_diagonal_(-float("inf"))
    return similarity.argmax(dim=1)


def compare_output(name: str, got: torch.Tensor, want: torch.Tensor) -> OutputAccuracy:
    g, w = got.detach().double(), want.detach().double()
    nonfinite = ~(torch.isfinite(g) & torch.isfinite(w))
    if bool(nonfinite.any()):  # NaN and Inf agree only with themselves; the metrics cover the finite rest
        agree = (g == w) | (torch.isnan(g) & torch.isnan(w))
        if not bool(agree[nonfinite].all()):
            return OutputAccuracy(name=name, max_abs_error=math.inf, max_rel_error=math.inf, cosine=0.0)
        g, w = torch.where(nonfinite, 0.0, g), torch.where(nonfinite, 0.0, w)
    diff = (g - w).abs().flatten()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(w.abs().max()) if w.numel() else 0.0
    rel = max_abs / scale if scale > 0 else max_abs
    gf, wf = g.flatten(), w.flatten()
    norms = float(gf.norm() * wf.norm())
    cosine = float(torch.dot(gf, wf) / norms) if norms > 0 else (1.0 if max_abs == 0 else 0.0)
    result = OutputAccuracy(name=name, max_abs_error=max_abs, max_rel_error=rel, cosine=_clamp_cosine(cosine))
    samples = _sample_cosines(g, w)
    if samples is not None:
        result.sample_cosine_min = _clamp_cosine(float(samples.min()))
        result.sample_cosine_mean = _clamp_cosine(float(samples.mean()))
    if g.dim() == 2 and g.shape[1] > 1 and g.shape[0] > 0:
        result.top1_agreement = float((g.argmax(1) == w.argmax(1)).double().mean())
        if g.shape[0] >= 3:
            result.neighbour_agreement = float((nearest_neighbours(g) == nearest_neighbours(w)).double().mean())
    return result


def _output_passes(o: OutputAccuracy, judged_by: str, rel_budget: Optional[float], cos_budget: float) -> bool:
    if rel_budget is not None and o.max_rel_error > rel_budget:
        return False
    if judged_by == PER_SAMPLE and o.sample_cosine_min is not None:
        return o.sample_cosine_min >= cos_budget
    return o.cosine >= cos_budget


def _own_precision_floor(dtype: str, want: Sequence[torch.Tensor], rel: float, cos: float) -> tuple[float, float]:
    """An fp32 conversion of a model that itself computes in float16/bfloat16 (its outputs are 16-bit)
    cannot match it closer than that type resolves: where the kernels run a bf16 op in float32 (CPUs
    without bf16 arithmetic), a value lands a unit or two in the last place away. So the fp32 budget
    widens to 4 units of the outputs' type (bf16 0.031, fp16 0.0039) and cosine 0.9999."""
    floats = [w for w in want if w.is_floating_point()]
    if dtype != "fp32" or not floats or any(w.dtype not in (torch.float16, torch.bfloat16) for w in floats):
        return rel, cos
    eps = max(torch.finfo(w.dtype).eps for w in floats)
    return max(rel, 4 * eps), min(cos, 0.9999)


def measure(names: Sequence[str], got: Sequence[torch.Tensor], want: Sequence[torch.Tensor], dtype: str,
            reference: str, max_rel_error: Optional[float] = None, min_cosine: Optional[float] = None,
            computed_in: Optional[str] = None, simulates_int8: bool = False,
            judged_as: Optional[str] = None) -> AccuracyRecord:
    """`simulates_int8`: the model itself rounds activations to int8 codes (fake_quantize nodes: a QDQ
    ONNX model, a quantization-aware-trained one). A float difference far inside fp32's budget moves a
    value across a rounding boundary, one code step, which later layers carry on; such a model's
    conversion is judged as an int8 one is, whatever its dtype. `judged_as`: the dtype whose budget applies
    when it is not `dtype`'s (an fp32 decoder storing its KV cache in bf16 is judged as bf16 is)."""
    judged_as = "int8" if simulates_int8 else judged_as or dtype
    default_rel, default_cos = DEFAULT_BUDGETS[judged_as]
    default_rel, default_cos = _own_precision_floor(judged_as, want, default_rel, default_cos)
    rel_budget = default_rel if max_rel_error is None else max_rel_error
    cos_budget = default_cos if min_cosine is None else min_cosine
    judged_by = ELEMENTWISE if judged_as == "fp32" else PER_SAMPLE
    judged_rel = rel_budget if judged_by == ELEMENTWISE or max_rel_error is not None else None
    if judged_by == PER_SAMPLE and judged_rel is not None:
        judged_by += " and max relative error"
    outputs = []
    for name, g, w in zip(names, got, want):
        if g.shape != w.shape:
            raise ValueError(f"output {name}: artifact shape {tuple(g.shape)} != eager shape {tuple(w.shape)}")
        outputs.append(compare_output(name, g, w))
    passed = all(_output_passes(o, judged_by, judged_rel, cos_budget) for o in outputs)
    return AccuracyRecord(reference=reference, dtype=dtype, budget_rel_error=rel_budget, budget_min_cosine=cos_budget,
                          judged_by=judged_by, computed_in=computed_in, passed=passed, outputs=outputs)


def describe_failure(record: AccuracyRecord) -> str:
    """The worst output by the measurement that decided, for the "not within budget" message."""
    if record.judged_by == ELEMENTWISE:
        worst = max(record.outputs, key=lambda o: o.max_rel_error)
        return (f"output {worst.name}: max relative error {worst.max_rel_error:.3g} (budget "
                f"{record.budget_rel_error:g}) and cosine {worst.cosine:.6f} (budget {record.budget_min_cosine:g})")
    worst = min(record.outputs, key=lambda o: o.sample_cosine_min if o.sample_cosine_min is not None else o.cosine)
    lowest = worst.sample_cosine_min if worst.sample_cosine_min is not None else worst.cosine
    text = f"output {worst.name}: lowest sample cosine {lowest:.6f} (budget {record.budget_min_cosine:g})"
    if "relative" in record.judged_by:
        text += f", max relative error {worst.max_rel_error:.3g} (budget {record.budget_rel_error:g})"
    return text


def eager_inputs(tensors: dict[str, torch.Tensor], decoder=None) -> dict[str, torch.Tensor]:
    """Inputs for the eager float32 oracle: float tensors as float32. An artifact may take some float inputs
    in its compute dtype (a bf16 decoder's KV cache, passes/cache_in_compute_dtype.py), and a decoder's cache as int8
    rows (--kv-cache int8; `decoder`, its manifest record, names the caches): read as their float32 values."""
    caches = cache_names(decoder)
    return {k: dequantize_rows(t) if k in caches and t.dtype == torch.int8
            else t.float() if t.is_floating_point() and t.dtype != torch.float32 else t for k, t in tensors.items()}


def cache_names(decoder) -> frozenset[str]:
    """The KV cache inputs and outputs a decoder record (manifest.DecoderRecord, or None) names."""
    return frozenset() if decoder is None else frozenset(name for pair in decoder.cache for name in pair)


def float_caches(outputs: Sequence[torch.Tensor], names: Sequence[str], decoder) -> list[torch.Tensor]:
    """An artifact's outputs with its int8 KV cache rows (by the decoder record's names) as float32 values, to
    compare with eager's float caches."""
    caches = cache_names(decoder)
    return [dequantize_rows(t) if name in caches and t.dtype == torch.int8 else t for name, t in zip(names, outputs)]


def as_signature_dtypes(tensors: dict[str, torch.Tensor], specs: dict[str, str]) -> dict[str, torch.Tensor]:
    """Float tensors cast to the float dtype the signature gives their name, or made int8 KV cache rows where it says
    int8 (a float model's only int8 inputs: --kv-cache int8); others as they are."""
    out = dict(tensors)
    for name, dtype in specs.items():
        t = out.get(name)
        if t is not None and t.is_floating_point() and dtype == "int8":
            out[name] = quantize_rows(t)
        elif (t is not None and t.is_floating_point() and dtype.startswith(("float", "bfloat"))
              and dtypes.to_name(t.dtype) != dtype):
            out[name] = t.to(dtypes.to_torch(dtype))  # the IR's own name table: never getattr on a name from a file
    return out


def flatten_outputs(value) -> list[torch.Tensor]:
    """Eager outputs as a flat list of tensors (tuples, lists, dicts, HF ModelOutputs)."""
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
