"""`ipexconvert inspect`: a summary of an artifact, without running it.

An artifact is untrusted: everything shown here comes from records the reader validated (the manifest
model with its strictly typed quantization record, and a graph that passed check_graph), so a hostile
file is refused with an ArtifactError instead of breaking the report. Printing it safely (markup, lone
surrogates, control characters) is the CLI's job.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .artifact import _parse_graph, quant_plan, read_manifest
from .errors import ArtifactError
from .ir import Graph, Program, dtypes
from .ir.graph import check_graph
from .manifest import Manifest
from .quant.plan import ActivationQuant, LayerPlan, QuantPlan


def _read(path: Path) -> tuple[Manifest, Graph]:
    """Manifest and graph, both checked (no tensors read and no hashes checked: older formats are shown too)."""
    manifest, graph_json = read_manifest(path)
    graph = _parse_graph(Path(path), graph_json)
    try:
        check_graph(graph)  # every spec's dtype and shape are sane before they are summed up below
    except ArtifactError as e:
        raise ArtifactError(f"{path}: {e.problem}", e.fix) from None
    return manifest, graph


@dataclass
class Inspection:
    summary: dict  # what `inspect --json` prints
    plan: Optional[QuantPlan] = None  # the manifest's quantization record, validated
    layers: list[LayerPlan] = field(default_factory=list)  # the plan's layers in graph order


def inspect_artifact(path: Path) -> Inspection:
    """The summary, and for an int8 artifact its plan and layers, from one read of the file."""
    manifest, graph = _read(path)
    by_dtype: dict[str, int] = {}
    for name in graph.constants:
        spec = graph.values[name]  # check_graph: every constant has a spec with a known dtype
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in spec.shape):
            # a weight has one fixed shape; a dim name or expression here means a corrupt or edited file
            raise ArtifactError(f"{path}: constant {name} has shape {spec.describe()}, not a list of integers",
                                "re-create the artifact with `ipexconvert optimize`; do not edit .ipxc files by hand")
        count = 1
        for d in spec.shape:
            count *= d
        by_dtype[spec.dtype] = by_dtype.get(spec.dtype, 0) + count * dtypes.to_torch(spec.dtype).itemsize
    ins = ", ".join(f"{i.name}: {i.spec.describe()}" for i in manifest.inputs)
    outs = ", ".join(f"{o.name}: {o.spec.describe()}" for o in manifest.outputs)
    summary = {
        "file_bytes": Path(path).stat().st_size,
        "signature": f"({ins}) -> ({outs})",
        "weight_bytes_by_dtype": by_dtype,
        "node_count": len(graph.nodes),
        "manifest": manifest.model_dump(mode="json", exclude={"tensor_sha256"}),
    }
    woq = weight_only_layers(graph)
    if woq:
        summary["weight_only"] = woq
    if manifest.decoder is not None:
        summary["decoder"] = decoder_summary(manifest, graph)
    plan = quant_plan(Path(path), manifest)
    if plan is None:
        return Inspection(summary)
    position = {node.name: i for i, node in enumerate(graph.nodes)}
    # graph order (the plan lists smoothed layers first); layers the graph does not have go last
    layers = sorted(plan.layers.values(), key=lambda layer: position.get(layer.node, len(position)))
    return Inspection(summary, plan, layers)


def decoder_summary(manifest: Manifest, graph: Graph) -> dict:
    """A decoder's cache: tensors, their storage (float32, bfloat16, or int8 rows: codes and a scale), bytes per cached
    position (batch 1), the dim's range, tokenizer, eos ids."""
    record = manifest.decoder
    per_token = 0
    stored = set()
    for past, _ in record.cache:
        spec = graph.values.get(past)
        if spec is None or spec.rank != 4:
            continue  # the loader refuses such a record; inspect still shows the rest
        stored.add("int8 rows" if spec.dtype == "int8" else spec.dtype)
        fixed = [d for i, d in enumerate(spec.shape) if i in (1, 3)]
        if all(isinstance(d, int) for d in fixed):
            per_token += fixed[0] * fixed[1] * dtypes.to_torch(spec.dtype).itemsize
    dim = graph.dims.get(record.cache_dim)
    return {"cache_tensors": len(record.cache), "cache_dtype": ", ".join(sorted(stored)),
            "cache_bytes_per_token": per_token, "max_positions": None if dim is None else dim.max + 1, "tokenizer": record.tokenizer is not None,
            "eos_token_ids": record.eos_token_ids, "static_cache_refusal": static_cache_refusal(graph, record)}


def static_cache_refusal(graph: Graph, record) -> Optional[str]:
    """Why a GPU would generate over the artifact's growing caches instead of static ones (None: it would not)."""
    from .runtime.static_cache import NotStatic, static_program

    try:
        static_program(Program(graph), record)
    except NotStatic as e:
        return str(e)
    return None


def decoder_accuracy_line(record: dict) -> str:
    """A DecoderAccuracy's dump in one line: the teacher-forced numbers, their budgets, the verdict (a number written as
    NaN or infinity dumps as null: _num shows it as n/a)."""
    def num(key: str, fmt: str) -> str:
        return _num(record[key], fmt)

    return (f"{record['positions']} positions of {record['text']} (prefill {record['prefill_tokens']}): mean cosine "
            f"{num('mean_cosine', '.6f')} (min {num('min_cosine', '.6f')}, budget {num('budget_mean_cosine', 'g')}), "
            f"top-1 agreement {num('top1_agreement', '.3f')} (budget {num('budget_top1_agreement', 'g')}), perplexity "
            f"{num('perplexity', '.4g')} vs {num('reference_perplexity', '.4g')} (ratio {num('perplexity_ratio', '.4f')}, "
            f"budget {num('budget_perplexity_ratio', 'g')}), {'passed' if record['passed'] else 'NOT met'}")


def weight_only_codes_line(record: dict) -> str:
    """A WeightOnlyRecord's dump in one line: which algorithm chose the codes, with what, on what text."""
    if record["algorithm"] == "rtn":
        return f"rtn (round to nearest, {record['implementation']})"
    clamped = record["int8_codes_clamped"]
    return (f"{record['algorithm']} ({record['implementation']}) for {record['layers']} linears, calibrated on "
            f"{record['calibration']}" + (f"; {clamped} int8 codes of -128 stored as -127" if clamped else ""))


def weight_only_guard_lines(record: dict) -> list[str]:
    """A WeightOnlyGuardRecord's dump: a summary line, then one line per layer it moved back to float."""
    moved = len(record["float_layers"])
    activations = record.get("activations") or "float"
    first = (f"{moved} of {record['candidates']} quantized layers moved back to float in "
             f"{_plural(len(record['rounds']), 'round')}, {activations} activations "
             f"({'passed' if record['passed'] else 'NOT met'}; ranked by {record['ranked_by']})")
    return [first, *(f"float: {layer['layer']}: {layer['reason']}" for layer in record["float_layers"])]


def weight_only_layers(graph: Graph) -> dict[str, int]:
    """Weight-only quantized layers by format, e.g. {"int4 g128 symmetric": 14}, from the woq_linear nodes (whose
    attrs check_graph parsed); activations other than float32 are named ("..., bf16 activations")."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "woq_linear":
            asymmetric = len(node.inputs) > 3 and node.inputs[3] is not None
            activations = ("int8" if node.attrs.get("activations") == "int8"
                           else "bf16" if graph.values[node.inputs[0]].dtype == "bfloat16" else None)
            label = (f"int{node.attrs['bits']} g{node.attrs['group_size']} "
                     f"{'asymmetric' if asymmetric else 'symmetric'}"
                     + (f", {activations} activations" if activations else ""))
            counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def summarize(path: Path) -> dict:
    return inspect_artifact(path).summary


# --------------------------------------------------------------------------- int8 artifacts
# The manifest stores the plan as a dict; artifact.quant_plan validates it into a QuantPlan (strictly: exact
# JSON types, no unknown fields), and everything below reads that model. Optional numbers can be null (a NaN
# written as JSON), so they are formatted with _num.

def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"


def _num(value: Optional[float], fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _span(lo: float, hi: float, fmt: str = ".4g") -> str:
    return f"{lo:{fmt}}" if lo == hi else f"{lo:{fmt}} .. {hi:{fmt}}"  # spaces: a narrow terminal wraps there


def _smoothquant_line(plan: QuantPlan) -> str:
    smoothed = [layer.smoothing for layer in plan.layers.values() if layer.smoothing is not None]
    setting = plan.smoothquant
    if not smoothed:
        return setting if setting.startswith("off") else f"{setting}: no layer smoothed (it did not lower the error)"
    alphas = [s.alpha for s in smoothed]
    norms = {s.folded_into for s in smoothed if s.folded_into != "quantize"}
    in_quantize = sum(s.folded_into == "quantize" for s in smoothed)
    where = []
    if norms:
        where.append(f"{_plural(len(norms), 'norm')} ({', '.join(sorted(norms))})")
    if in_quantize:
        where.append(f"the quantize step of {_plural(in_quantize, 'layer')}")
    return (f"{setting}: {len(smoothed)} of {_plural(len(plan.layers), 'layer')} smoothed, "
            f"alpha {_span(min(alphas), max(alphas), 'g')}, 1/s folded into {' and '.join(where)}")


def _guard_line(plan: QuantPlan) -> str:
    g = plan.guard  # a GuardRecord's dump (validated)
    if g is None:
        return "off (--no-guard): every layer the plan quantized stays int8"
    moved = g["rounds"][-1]["fallback_layers"] if g["rounds"] else 0
    verdict = "passed" if g["passed"] else "NOT met"
    return (f"{g['metric']} error {_num(g['final_error'], '.4g')}, budget {g['budget']:g}, {verdict} "
            f"(on {_plural(g['held_out_batches'], 'held-out batch')}; {_plural(moved, 'layer')} moved to float in "
            f"{_plural(len(g['rounds']), 'round')})")


def _tuning_line(plan: QuantPlan) -> Optional[str]:
    t = plan.tuning  # a TuningRecord's dump (validated)
    if t is None:
        return None
    final = t["trials"][-1]["score"] if t["trials"] else None
    return (f"fp32 score {_num(t['baseline_score'], '.6g')}, {len(t['trials'])} trial(s), final score "
            f"{_num(final, '.6g')} (tolerable loss {t['tolerable_loss']:g})")


def quant_overview(plan: QuantPlan) -> dict:
    """Plan-level facts for the optimize summary and inspect: counts, SmoothQuant, guard, tuning, calibration."""
    fallbacks = plan.fallback_layers()
    calibration = (f"{plan.calibration}: {_plural(plan.calibration_batches, 'batch')} to calibrate, "
                   f"{plan.held_out_batches} held out for the accuracy guard")
    return {"quantized": len(plan.layers) - len(fallbacks), "float": len(fallbacks), "fallbacks": fallbacks,
            "smoothquant": _smoothquant_line(plan), "guard": _guard_line(plan), "tuning": _tuning_line(plan),
            "calibration": calibration}


# Columns of the per-layer table: header -> cell text from a LayerPlan.
def _input(cell: Callable[[ActivationQuant], str]) -> Callable[[LayerPlan], str]:
    return lambda layer: "-" if layer.input is None else cell(layer.input)


def _weight_scale(layer: LayerPlan) -> str:
    ends = [v for v in (layer.weight_scale_min, layer.weight_scale_max) if v is not None]
    return "-" if not ends else _span(ends[0], ends[-1], ".3g")


QUANT_COLUMNS: dict[str, Callable[[LayerPlan], str]] = {
    "layer": lambda layer: layer.node,
    "op": lambda layer: layer.op,
    "precision": lambda layer: "int8" if layer.quantized else "float",
    "in scale": _input(lambda q: f"{q.scale:.3g}"),
    "zero pt": _input(lambda q: str(q.zero_point)),
    "in range": _input(lambda q: f"[{q.lo:.3g}, {q.hi:.3g}]"),
    "observer": _input(lambda q: q.observer),
    "weight scale": _weight_scale,
    "SmoothQuant": lambda layer: "-" if layer.smoothing is None else
    f"{layer.smoothing.alpha:g} -> {layer.smoothing.folded_into}",
    "sensitivity": lambda layer: "-" if layer.sensitivity is None else f"{layer.sensitivity:.3g}",
}
