"""`ipexconvert check`: the CI regression gate (artifact vs golden outputs, an eager model, or an ONNX file
under ONNX Runtime, e.g. the artifact's own export).

NaN and Inf: errors are measured where both sides are finite. With check_finite (the default)
an output also fails when its NaN/Inf values are not where the reference has them: NaN or Inf
where the reference is finite, or a number where the reference is NaN/Inf (a kernel that
swallowed a NaN, e.g. oneDNN's max pooling or a relu fused into a oneDNN convolution). Without
it, those positions are counted in the report but do not fail the check."""
from __future__ import annotations

from pathlib import Path
from typing import Optional
from xml.sax.saxutils import quoteattr

import torch

from .accuracy import DEFAULT_BUDGETS, compare_output, eager_inputs, flatten_outputs, float_caches
from .errors import UserInputError


def _onnx_runtime_outputs(reference: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """An .onnx reference (e.g. the artifact's own `ipexconvert export`) run under ONNX Runtime;
    inputs and outputs are matched by position."""
    try:
        from .frontend.onnx import model_file, onnx_runtime
    except ImportError as e:
        raise UserInputError(f"an .onnx reference needs the onnx package ({e})", "pip install onnx onnxruntime") from None
    sess = onnx_runtime.session(model_file.load(Path(reference)))
    if sess is None:
        raise UserInputError(f"ONNX Runtime cannot run {reference} (not installed, or it refuses the model)",
                             "pip install onnxruntime (the ipexconvert[onnxruntime] extra)")
    if len(sess.get_inputs()) != len(inputs):
        raise UserInputError(f"{reference} takes {len(sess.get_inputs())} input(s), the artifact {len(inputs)}",
                             "compare the artifact with its own ONNX export or source")
    return list(onnx_runtime.runner(sess)(inputs))


def _reference_outputs(reference: str, names: list[str], tensors: dict[str, torch.Tensor], decoder, model_factory,
                       model_kwargs, trust_pickle, input_names: list[str]) -> list[torch.Tensor]:
    if reference.lower().endswith(".onnx") and model_factory is None:
        return _onnx_runtime_outputs(reference, [tensors[n] for n in input_names])
    if reference.endswith(".safetensors") and Path(reference).is_file() and model_factory is None:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            golden = load_file(reference)
        except (SafetensorError, OSError) as e:
            raise UserInputError(f"{reference} is not a readable safetensors file ({e})", "pass golden outputs saved with safetensors") from None
        missing = [n for n in names if n not in golden]
        if missing:
            raise UserInputError(f"golden file {reference} lacks output(s) {', '.join(missing)} (has: {', '.join(golden)})",
                                 f"save the outputs under the names {', '.join(names)} (see `ipexconvert run -o`)")
        return [golden[n] for n in names]
    from .frontend.torch.sources import SourceRequest, parse_model_kwargs, resolve_source

    source = resolve_source(SourceRequest(location=reference, model_factory=model_factory,
                                          model_kwargs=parse_model_kwargs(model_kwargs), trust_pickle=trust_pickle))
    with torch.inference_mode():
        return flatten_outputs(source.eager(**eager_inputs(tensors, decoder)))


def nonfinite_counts(t: torch.Tensor) -> tuple[int, int]:
    """(NaN count, Inf count) of a tensor; (0, 0) for integer and bool tensors."""
    if not t.is_floating_point():
        return 0, 0
    nan = int(torch.isnan(t).sum())
    return nan, int((~torch.isfinite(t)).sum()) - nan


def _finite_agreement(got: torch.Tensor, want: torch.Tensor) -> tuple[torch.Tensor, dict[str, int]]:
    """Where both are finite (a bool mask), and how the non-finite values disagree."""
    g_ok = torch.isfinite(got) if got.is_floating_point() else torch.ones_like(got, dtype=torch.bool)
    w_ok = torch.isfinite(want) if want.is_floating_point() else torch.ones_like(want, dtype=torch.bool)
    both_bad = ~g_ok & ~w_ok
    same_kind = (torch.isnan(got) & torch.isnan(want)) | (got == want) if both_bad.any() else both_bad
    counts = {
        "artifact": int((~g_ok).sum()), "reference": int((~w_ok).sum()),
        "nonfinite_where_reference_finite": int((~g_ok & w_ok).sum()),
        "finite_where_reference_nonfinite": int((g_ok & ~w_ok).sum()),
        "different_nonfinite": int((both_bad & ~same_kind).sum()),
    }
    return g_ok & w_ok, counts


def _nonfinite_message(c: dict[str, int]) -> str:
    parts = []
    if c["nonfinite_where_reference_finite"]:
        parts.append(f"{c['nonfinite_where_reference_finite']} value(s) NaN/Inf where the reference is finite")
    if c["finite_where_reference_nonfinite"]:
        parts.append(f"{c['finite_where_reference_nonfinite']} value(s) finite where the reference is NaN/Inf")
    if c["different_nonfinite"]:
        parts.append(f"{c['different_nonfinite']} value(s) a different NaN/Inf than the reference")
    return "; ".join(parts)


def run_check(artifact: Path, reference: str, inputs_path: Optional[Path], rtol: Optional[float], atol: float,
              min_cosine: Optional[float], model_factory: Optional[str] = None, model_kwargs: Optional[str] = None,
              trust_pickle: bool = False, check_finite: bool = True, device: Optional[str] = None) -> dict:
    from .api import load_artifact
    from .artifact import read_example_inputs
    from .frontend.torch.inputs import load_inputs_file

    model = load_artifact(artifact, device=device)
    tensors = load_inputs_file(inputs_path, model.signature.input_names) if inputs_path else read_example_inputs(artifact)
    if not tensors:
        raise UserInputError(f"{artifact} stores no example inputs", "pass --inputs inputs.safetensors")
    got = [t.cpu() for t in model.run_list([tensors[n] for n in model.signature.input_names])]  # references run on the CPU
    names = model.signature.output_names
    got = float_caches(got, names, model.manifest.decoder)  # (an int8 KV cache's rows, as their values)
    want = _reference_outputs(reference, names, tensors, model.manifest.decoder, model_factory, model_kwargs,
                              trust_pickle, model.signature.input_names)
    if len(want) != len(got):
        raise UserInputError(f"the reference has {len(want)} output(s), the artifact {len(got)}",
                             "compare the artifact with the model it was converted from")
    default_rel, default_cos = DEFAULT_BUDGETS[model.manifest.dtype]
    rtol = default_rel if rtol is None else rtol
    min_cosine = default_cos if min_cosine is None else min_cosine
    outputs = []
    for name, g, w in zip(names, got, want):
        if g.shape != w.shape:
            outputs.append({"name": name, "passed": False, "message": f"shape {tuple(g.shape)} != reference {tuple(w.shape)}",
                            "max_abs_error": float("inf"), "max_rel_error": float("inf"), "cosine": 0.0, "tolerance": 0.0})
            continue
        finite, counts = _finite_agreement(g.detach(), w.detach())
        g_f, w_f = g.detach()[finite], w.detach()[finite]
        acc = compare_output(name, g_f, w_f)
        tolerance = atol + rtol * float(w_f.abs().max()) if w_f.numel() else atol
        within = acc.max_abs_error <= tolerance and acc.cosine >= min_cosine
        mismatch = _nonfinite_message(counts)
        passed = within and not (check_finite and mismatch)
        message = "; ".join(m for m in ("" if within else "outside tolerance", mismatch if check_finite else "") if m)
        outputs.append({"name": name, "passed": passed, "max_abs_error": acc.max_abs_error,
                        "max_rel_error": acc.max_rel_error, "cosine": acc.cosine, "tolerance": tolerance,
                        "nonfinite": counts, "message": message})
    return {"artifact": str(artifact), "device": model.device, "reference": reference, "rtol": rtol, "atol": atol,
            "min_cosine": min_cosine, "check_finite": check_finite, "passed": all(o["passed"] for o in outputs), "outputs": outputs}


def write_junit(report: dict, path: Path) -> None:
    """One testsuite, one testcase per output, so CI systems show each output's result."""
    failures = sum(not o["passed"] for o in report["outputs"])
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             f'<testsuite name="ipexconvert-check" tests="{len(report["outputs"])}" failures="{failures}">']
    for o in report["outputs"]:
        case = f'  <testcase classname={quoteattr(Path(report["artifact"]).name)} name={quoteattr(o["name"])}'
        detail = (f"max_abs_error={o['max_abs_error']:.6g} tolerance={o['tolerance']:.6g} "
                  f"cosine={o['cosine']:.6f} min_cosine={report['min_cosine']}")
        if o.get("nonfinite") and (o["nonfinite"]["artifact"] or o["nonfinite"]["reference"]):
            detail += f" nonfinite_artifact={o['nonfinite']['artifact']} nonfinite_reference={o['nonfinite']['reference']}"
        if o["passed"]:
            lines.append(case + f'><system-out>{detail}</system-out></testcase>')
        else:
            lines.append(case + f'><failure message={quoteattr(o["message"])}>{detail}</failure></testcase>')
    lines.append("</testsuite>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
