"""`ipexconvert check`: the CI regression gate (artifact vs golden outputs or an eager model)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional
from xml.sax.saxutils import quoteattr

import torch

from .accuracy import DEFAULT_BUDGETS, compare_output, flatten_outputs
from .errors import UserInputError


def _reference_outputs(reference: str, names: list[str], tensors: dict[str, torch.Tensor], model_factory, model_kwargs,
                       trust_pickle) -> list[torch.Tensor]:
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
    from .frontend.sources import SourceRequest, parse_model_kwargs, resolve_source

    source = resolve_source(SourceRequest(location=reference, model_factory=model_factory,
                                          model_kwargs=parse_model_kwargs(model_kwargs), trust_pickle=trust_pickle))
    with torch.inference_mode():
        return flatten_outputs(source.eager(**tensors))


def run_check(artifact: Path, reference: str, inputs_path: Optional[Path], rtol: Optional[float], atol: float,
              min_cosine: Optional[float], model_factory: Optional[str] = None, model_kwargs: Optional[str] = None,
              trust_pickle: bool = False) -> dict:
    from .api import load_artifact
    from .artifact import read_example_inputs
    from .frontend.inputs import load_inputs_file

    model = load_artifact(artifact)
    tensors = load_inputs_file(inputs_path, model.signature.input_names) if inputs_path else read_example_inputs(artifact)
    if not tensors:
        raise UserInputError(f"{artifact} stores no example inputs", "pass --inputs inputs.safetensors")
    got = model.run_list([tensors[n] for n in model.signature.input_names])
    names = model.signature.output_names
    want = _reference_outputs(reference, names, tensors, model_factory, model_kwargs, trust_pickle)
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
        acc = compare_output(name, g, w)
        tolerance = atol + rtol * float(w.detach().abs().max()) if w.numel() else atol
        passed = acc.max_abs_error <= tolerance and acc.cosine >= min_cosine
        outputs.append({"name": name, "passed": passed, "max_abs_error": acc.max_abs_error,
                        "max_rel_error": acc.max_rel_error, "cosine": acc.cosine, "tolerance": tolerance,
                        "message": "" if passed else "outside tolerance"})
    return {"artifact": str(artifact), "reference": reference, "rtol": rtol, "atol": atol, "min_cosine": min_cosine,
            "passed": all(o["passed"] for o in outputs), "outputs": outputs}


def write_junit(report: dict, path: Path) -> None:
    """One testsuite, one testcase per output, so CI systems show each output's result."""
    failures = sum(not o["passed"] for o in report["outputs"])
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             f'<testsuite name="ipexconvert-check" tests="{len(report["outputs"])}" failures="{failures}">']
    for o in report["outputs"]:
        case = f'  <testcase classname={quoteattr(Path(report["artifact"]).name)} name={quoteattr(o["name"])}'
        detail = (f"max_abs_error={o['max_abs_error']:.6g} tolerance={o['tolerance']:.6g} "
                  f"cosine={o['cosine']:.6f} min_cosine={report['min_cosine']}")
        if o["passed"]:
            lines.append(case + f'><system-out>{detail}</system-out></testcase>')
        else:
            lines.append(case + f'><failure message={quoteattr(o["message"])}>{detail}</failure></testcase>')
    lines.append("</testsuite>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
