"""`ipexconvert inspect`: a summary of an artifact, without running it."""
from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from .artifact import read_manifest
from .errors import ArtifactError
from .ir import Graph, dtypes


def _read(path: Path):
    manifest, graph_json = read_manifest(path)
    try:
        graph = Graph.model_validate_json(graph_json)
    except ValidationError as e:
        raise ArtifactError(f"{path} has an invalid graph: {e.errors()[0]['msg']}",
                            "re-create it with `ipexconvert optimize`") from None
    return manifest, graph


def summarize(path: Path) -> dict:
    manifest, graph = _read(path)
    by_dtype: dict[str, int] = {}
    for name in graph.constants:
        spec = graph.values.get(name)
        if spec is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in spec.shape):
            # a weight has one fixed shape; a dim name or expression here means a corrupt or edited file
            shape = "?" if spec is None else spec.describe()
            raise ArtifactError(f"{path}: constant {name} has shape {shape}, not a list of integers",
                                "re-create the artifact with `ipexconvert optimize`; do not edit .ipxc files by hand")
        count = 1
        for d in spec.shape:
            count *= d
        by_dtype[spec.dtype] = by_dtype.get(spec.dtype, 0) + count * dtypes.to_torch(spec.dtype).itemsize
    ins = ", ".join(f"{i.name}: {i.spec.describe()}" for i in manifest.inputs)
    outs = ", ".join(f"{o.name}: {o.spec.describe()}" for o in manifest.outputs)
    return {
        "file_bytes": Path(path).stat().st_size,
        "signature": f"({ins}) -> ({outs})",
        "weight_bytes_by_dtype": by_dtype,
        "node_count": len(graph.nodes),
        "manifest": manifest.model_dump(mode="json", exclude={"tensor_sha256"}),
    }


# --------------------------------------------------------------------------- int8 artifacts
# The manifest's `quantization` is a QuantPlan dumped to JSON (quant/plan.py); these read it as a dict,
# so an artifact stays inspectable even if the plan model gains fields.

def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"


def _span(lo: float, hi: float, fmt: str = ".4g") -> str:
    return f"{lo:{fmt}}" if lo == hi else f"{lo:{fmt}} .. {hi:{fmt}}"  # spaces: a narrow terminal wraps there


def _smoothquant_line(q: dict) -> str:
    smoothed = [layer["smoothing"] for layer in q["layers"].values() if layer.get("smoothing")]
    setting = q.get("smoothquant", "off")
    if not smoothed:
        return setting if setting.startswith("off") else f"{setting}: no layer smoothed (it did not lower the error)"
    alphas = [s["alpha"] for s in smoothed]
    norms = {s["folded_into"] for s in smoothed if s["folded_into"] != "quantize"}
    in_quantize = sum(s["folded_into"] == "quantize" for s in smoothed)
    where = []
    if norms:
        where.append(f"{_plural(len(norms), 'norm')} ({', '.join(sorted(norms))})")
    if in_quantize:
        where.append(f"the quantize step of {_plural(in_quantize, 'layer')}")
    return (f"{setting}: {len(smoothed)} of {_plural(len(q['layers']), 'layer')} smoothed, alpha {_span(min(alphas), max(alphas), 'g')}, "
            f"1/s folded into {' and '.join(where)}")


def _guard_line(q: dict) -> str:
    g = q.get("guard")
    if not g:
        return "off (--no-guard): every layer the plan quantized stays int8"
    moved = g["rounds"][-1]["fallback_layers"] if g.get("rounds") else 0
    verdict = "passed" if g["passed"] else "NOT met"
    return (f"{g['metric']} error {g['final_error']:.4g}, budget {g['budget']:g}, {verdict} "
            f"(on {_plural(g['held_out_batches'], 'held-out batch')}; {_plural(moved, 'layer')} moved to float in "
            f"{_plural(len(g.get('rounds', [])), 'round')})")


def quant_overview(q: dict) -> dict:
    """Plan-level facts for the optimize summary and inspect: counts, SmoothQuant, guard, calibration."""
    layers = q["layers"]
    fallbacks = {name: layer.get("fallback_reason") or "" for name, layer in layers.items() if not layer["quantized"]}
    calibration = (f"{q['calibration']}: {_plural(q['calibration_batches'], 'batch')} to calibrate, "
                   f"{q['held_out_batches']} held out for the accuracy guard")
    return {"quantized": len(layers) - len(fallbacks), "float": len(fallbacks), "fallbacks": fallbacks,
            "smoothquant": _smoothquant_line(q), "guard": _guard_line(q), "calibration": calibration}


# Columns of the per-layer table: header -> cell text from a LayerPlan dict.
def _input(key: str, fmt: str):
    return lambda layer: "-" if not layer.get("input") else format(layer["input"][key], fmt)


QUANT_COLUMNS = {
    "layer": lambda layer: layer["node"],
    "op": lambda layer: layer["op"],
    "precision": lambda layer: "int8" if layer["quantized"] else "float",
    "in scale": _input("scale", ".3g"),
    "zero pt": _input("zero_point", "d"),
    "in range": lambda layer: "-" if not layer.get("input") else f"[{layer['input']['lo']:.3g}, {layer['input']['hi']:.3g}]",
    "observer": _input("observer", "s"),
    "weight scale": lambda layer: "-" if layer.get("weight_scale_min") is None else
    _span(layer["weight_scale_min"], layer["weight_scale_max"], ".3g"),
    "SmoothQuant": lambda layer: "-" if not layer.get("smoothing") else
    f"{layer['smoothing']['alpha']:g} -> {layer['smoothing']['folded_into']}",
    "sensitivity": lambda layer: "-" if layer.get("sensitivity") is None else f"{layer['sensitivity']:.3g}",
}


def quant_layers(path: Path, q: dict) -> list[dict]:
    """The plan's layers in graph order (the plan lists smoothed layers first)."""
    _, graph = _read(path)
    position = {node.name: i for i, node in enumerate(graph.nodes)}
    return sorted(q["layers"].values(), key=lambda layer: position.get(layer["node"], len(position)))
