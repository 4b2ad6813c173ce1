"""The `ipexconvert` command: optimize, inspect, run, bench, check, doctor.

Every command turns ipexconvert errors into a two-line message (problem, fix) and an
exit code: 0 ok, 1 accuracy regression, 2 usage or input error, 3 internal error.
"""
from __future__ import annotations

import functools
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import IpexConvertError, UserInputError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Convert PyTorch models into fast, safe single-file artifacts (.ipxc) and run them.")
out = Console()
err = Console(stderr=True)


def handle_errors(fn: Callable) -> Callable:
    """Bad input ends in a clear message and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        try:
            return fn(*args, **kwargs)
        except IpexConvertError as e:
            err.print(f"[bold red]error:[/] {escape(e.problem)}", highlight=False)
            if e.fix:
                err.print(f"  [bold]fix:[/] {escape(e.fix)}", highlight=False)
            raise typer.Exit(e.exit_code)
        except KeyboardInterrupt:
            err.print("interrupted; nothing was written")
            raise typer.Exit(130)
        except (typer.Exit, typer.Abort):
            raise
        except Exception as e:  # a bug in ipexconvert, not the user's fault
            if os.environ.get("IPEXCONVERT_DEBUG"):
                raise
            err.print(f"[bold red]internal error:[/] {type(e).__name__}: {escape(str(e))}", highlight=False)
            err.print("  this is a bug in ipexconvert; rerun with IPEXCONVERT_DEBUG=1 for the traceback and report it")
            raise typer.Exit(3)

    return wrapper


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def _json_safe(value: Any) -> Any:
    """Non-finite floats (an output whose shape differs from the reference) become null: --json must stay valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


# --------------------------------------------------------------------------- optimize
@app.command()
@handle_errors
def optimize(
    source: str = typer.Argument(..., help="model.pt2, a Hugging Face folder, a checkpoint (.safetensors/.pt), or example:NAME"),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32 or bf16"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="artifact path (default: NAME.DTYPE.ipxc)"),
    input: List[str] = typer.Option([], "--input", help="NAME:SHAPE:DTYPE, e.g. x:batch,3,224,224:float32 (repeatable)"),
    example_inputs: Optional[Path] = typer.Option(None, "--example-inputs", help="safetensors file with one tensor per input"),
    model_factory: Optional[str] = typer.Option(None, "--model-factory", help="package.module:function building the model"),
    model_kwargs: Optional[str] = typer.Option(None, "--model-kwargs", help="JSON keyword arguments for the factory"),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="allow loading a pickled nn.Module (runs code from the file)"),
    passes: Optional[str] = typer.Option(None, "--passes", help="comma-separated pass list replacing the dtype's pipeline"),
    skip_pass: List[str] = typer.Option([], "--skip-pass", help="pass to leave out (repeatable)"),
    max_rel_error: Optional[float] = typer.Option(None, "--max-rel-error", help="accuracy budget: max |artifact-eager| / max |eager|"),
    min_cosine: Optional[float] = typer.Option(None, "--min-cosine", help="accuracy budget: min cosine similarity to eager"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="time eager vs artifact on the example inputs"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
):
    """Convert a model into an .ipxc artifact and check it against eager PyTorch."""
    from .api import load_artifact
    from .api import optimize as run_optimize
    from .frontend.inputs import load_inputs_file, parse_input_arg
    from .frontend.sources import parse_model_kwargs

    if output is not None and output.is_dir():
        raise UserInputError(f"-o {output} is a folder, not an artifact path", f"pass a file path, e.g. -o {output / 'model.ipxc'}")
    input_args = [parse_input_arg(text) for text in input]
    tensors = load_inputs_file(example_inputs) if example_inputs else None
    kwargs = parse_model_kwargs(model_kwargs)
    with err.status("converting", spinner="dots") as status:
        result = run_optimize(
            source, tensors, dtype=dtype, output=output, inputs=input_args or None,
            passes=[p.strip() for p in passes.split(",") if p.strip()] if passes else None, skip_passes=skip_pass,
            max_rel_error=max_rel_error, min_cosine=min_cosine, model_factory=model_factory, model_kwargs=kwargs,
            trust_pickle=trust_pickle, progress=lambda msg: status.update(msg))
        timings = None
        if timing:
            status.update("timing eager vs artifact")
            from .bench import time_pair

            model = load_artifact(result.path)
            timings = time_pair(result.source.eager, model, result.example_inputs, rounds=10)
    manifest = result.manifest
    size = result.path.stat().st_size
    if as_json:
        out.print_json(json.dumps({"path": str(result.path), "size_bytes": size, "manifest": manifest.model_dump(mode="json"),
                                   "timing_ms": timings}))
        return
    table = Table(title=f"passes ({len(manifest.passes)})", show_edge=False)
    table.add_column("pass")
    table.add_column("changes")
    for record in manifest.passes:
        changed = ", ".join(f"{k}={v}" for k, v in record.changes.items() if v) or "-"
        table.add_row(record.name, changed)
    out.print(table)
    ops = ", ".join(f"{k} {v}" for k, v in manifest.op_histogram.items())
    out.print(f"[bold]ops[/] ({sum(manifest.op_histogram.values())}): {ops}", highlight=False)
    for acc in manifest.accuracy.outputs:
        out.print(f"[bold]accuracy[/] {acc.name}: max rel error {acc.max_rel_error:.2e}, cosine {acc.cosine:.6f} "
                  f"(budget {manifest.accuracy.budget_rel_error:g} / {manifest.accuracy.budget_min_cosine:g})", highlight=False)
    if timings:
        out.print(f"[bold]latency[/] (median of {timings['rounds']}): eager {timings['eager_ms']:.2f} ms, "
                  f"artifact {timings['artifact_ms']:.2f} ms (x{timings['eager_ms'] / timings['artifact_ms']:.2f})", highlight=False)
    out.print(f"[bold green]wrote[/] {escape(str(result.path))} ({_human_bytes(size)}, {manifest.dtype})", highlight=False)


# --------------------------------------------------------------------------- inspect
@app.command()
@handle_errors
def inspect(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Show what an artifact holds: manifest, passes, ops, fallbacks, weights, signature."""
    from .inspection import summarize

    summary = summarize(artifact)
    if as_json:
        out.print_json(json.dumps(summary))
        return
    m = summary["manifest"]
    out.print(f"[bold]{escape(str(artifact))}[/] — format v{m['format_version']}, {m['dtype']}, device {m['device']}, "
              f"{_human_bytes(summary['file_bytes'])}", highlight=False)
    out.print(f"source: {m['source']['kind']} {m['source']['location']}; made by {m['producer']} with torch {m['torch_version']} "
              f"at {m['created_at']}", highlight=False)
    out.print(f"signature: {escape(summary['signature'])}", highlight=False)
    if m["dims"]:
        out.print("dynamic dims: " + ", ".join(f"{k} {v['min']}..{v['max']}" for k, v in m["dims"].items()), highlight=False)
    passes = Table(title="passes", show_edge=False)
    passes.add_column("pass")
    passes.add_column("changes")
    for p in m["passes"]:
        passes.add_row(p["name"], ", ".join(f"{k}={v}" for k, v in p["changes"].items() if v) or "-")
    out.print(passes)
    ops = Table(title="ops", show_edge=False)
    ops.add_column("op")
    ops.add_column("count", justify="right")
    for name, count in m["op_histogram"].items():
        ops.add_row(name, str(count))
    out.print(ops)
    out.print("fallback ATen ops: " + (", ".join(m["fallback_ops"]) or "none"), highlight=False)
    out.print("weights: " + ", ".join(f"{k} {_human_bytes(v)}" for k, v in summary["weight_bytes_by_dtype"].items()), highlight=False)
    if m["accuracy"]:
        for acc in m["accuracy"]["outputs"]:
            out.print(f"accuracy at conversion, {acc['name']}: max rel error {acc['max_rel_error']:.2e}, cosine {acc['cosine']:.6f}",
                      highlight=False)


# --------------------------------------------------------------------------- run
@app.command()
@handle_errors
def run(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="safetensors file with one tensor per input (default: the stored example inputs)"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="where to write outputs (safetensors)"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="intra-op threads (default: all cores)"),
):
    """Run an artifact on inputs from a safetensors file and write the outputs."""
    from safetensors.torch import save_file

    from .api import load_artifact
    from .artifact import read_example_inputs
    from .frontend.inputs import load_inputs_file

    if output is not None and output.is_dir():
        raise UserInputError(f"-o {output} is a folder, not a file path", f"pass a file path, e.g. -o {output / 'outputs.safetensors'}")
    model = load_artifact(artifact, threads=threads)
    tensors = load_inputs_file(inputs, model.signature.input_names) if inputs else read_example_inputs(artifact)
    results = model.run_dict(tensors)
    for name, t in results.items():
        out.print(f"{name}: {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}", highlight=False, markup=False)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_name(f".{output.name}.tmp")
        try:
            save_file({k: v.contiguous() for k, v in results.items()}, str(tmp))
            os.replace(tmp, output)
        finally:
            if tmp.exists():
                tmp.unlink()
        out.print(f"wrote {escape(str(output))}", highlight=False)


# --------------------------------------------------------------------------- bench
@app.command()
@handle_errors
def bench(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    against: Optional[str] = typer.Option(None, "--against", help="also time this eager model (same SOURCE forms as optimize)"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="safetensors inputs (default: stored example inputs)"),
    dim: List[str] = typer.Option([], "--dim", help="NAME=SIZE for a dynamic dim, e.g. batch=16 (resizes the example inputs)"),
    warmup: int = typer.Option(3, "--warmup", min=0),
    rounds: int = typer.Option(20, "--rounds", min=1),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch intra-op threads (default: all cores)"),
    profile: bool = typer.Option(False, "--profile", help="print time per op kind"),
    as_json: bool = typer.Option(False, "--json"),
):
    """Time an artifact (and optionally the eager model): median/p90 latency, throughput, memory."""
    from .bench import run_bench

    report = run_bench(artifact, against=against, inputs_path=inputs, dims=dim, warmup=warmup, rounds=rounds,
                       threads=threads, profile=profile, console=err)
    if as_json:
        out.print_json(json.dumps(report))
        return
    table = Table(title=f"bench {artifact.name} (batch {report['batch']}, {report['threads']} threads, ISA {report['isa']})",
                  show_edge=False)
    for col in ("model", "median ms", "p90 ms", "throughput/s"):
        table.add_column(col, justify="right" if col != "model" else "left")
    for row in report["results"]:
        table.add_row(row["name"], f"{row['median_ms']:.2f}", f"{row['p90_ms']:.2f}", f"{row['throughput']:.1f}")
    out.print(table)
    out.print(f"load {report['load_ms']:.1f} ms; peak RSS {_human_bytes(report['peak_rss_bytes'])}", highlight=False)
    if report.get("profile"):
        prof = Table(title="time per op kind (one run)", show_edge=False)
        prof.add_column("kernel")
        prof.add_column("ms", justify="right")
        prof.add_column("share", justify="right")
        total = sum(report["profile"].values()) or 1.0
        for name, sec in sorted(report["profile"].items(), key=lambda kv: -kv[1]):
            prof.add_row(name, f"{sec * 1e3:.3f}", f"{100 * sec / total:.1f}%")
        out.print(prof)


# --------------------------------------------------------------------------- check
@app.command()
@handle_errors
def check(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    reference: str = typer.Option(..., "--reference", help="golden outputs (.safetensors) or a model SOURCE to run eagerly"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="safetensors inputs (default: stored example inputs)"),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="max |artifact-ref| / max |ref| (default per dtype)"),
    atol: float = typer.Option(0.0, "--atol", help="absolute slack added to the tolerance"),
    min_cosine: Optional[float] = typer.Option(None, "--min-cosine", help="min cosine similarity (default per dtype)"),
    model_factory: Optional[str] = typer.Option(None, "--model-factory"),
    model_kwargs: Optional[str] = typer.Option(None, "--model-kwargs"),
    trust_pickle: bool = typer.Option(False, "--trust-pickle"),
    junit: Optional[Path] = typer.Option(None, "--junit", help="write a JUnit XML report here"),
    as_json: bool = typer.Option(False, "--json"),
):
    """CI gate: compare an artifact's outputs with a reference. Exit 0 within tolerance, 1 on regression, 2 on usage error."""
    from .check import run_check, write_junit

    report = run_check(artifact, reference, inputs_path=inputs, rtol=rtol, atol=atol, min_cosine=min_cosine,
                       model_factory=model_factory, model_kwargs=model_kwargs, trust_pickle=trust_pickle)
    if junit is not None:
        write_junit(report, junit)
    if as_json:
        out.print_json(json.dumps(_json_safe(report)))
    else:
        for o in report["outputs"]:
            status = "[green]ok[/]" if o["passed"] else "[bold red]REGRESSION[/]"
            out.print(f"{status} {o['name']}: max abs err {o['max_abs_error']:.3e}, rel {o['max_rel_error']:.3e} "
                      f"(tol {o['tolerance']:.3e}), cosine {o['cosine']:.6f} (min {report['min_cosine']:g})", highlight=False)
        out.print("[bold green]PASS[/]" if report["passed"] else "[bold red]FAIL[/]")
    raise typer.Exit(0 if report["passed"] else 1)


# --------------------------------------------------------------------------- doctor
@app.command()
@handle_errors
def doctor(as_json: bool = typer.Option(False, "--json")):
    """Versions, CPU features, and the ISA level the runtime will use."""
    from .doctor import environment_report

    report = environment_report()
    if as_json:
        out.print_json(json.dumps(report))
        return
    for key, value in report.items():
        if isinstance(value, dict):
            out.print(f"[bold]{key}[/]: " + ", ".join(f"{k} {v}" for k, v in value.items()), highlight=False)
        elif isinstance(value, list):
            out.print(f"[bold]{key}[/]: {' '.join(map(str, value)) or '-'}", highlight=False)
        else:
            out.print(f"[bold]{key}[/]: {value}", highlight=False)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
