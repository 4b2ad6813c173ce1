"""Timing helpers behind `ipexconvert bench` and the quick timing in `optimize`.

Rounds alternate between the models being compared (interleaved), so drift on a
shared machine hits both alike; we report medians and p90.
"""
from __future__ import annotations

import resource
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from .accuracy import as_signature_dtypes, eager_inputs
from .errors import UserInputError
from .runtime.kernels import CHOOSING_CALLS


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def time_interleaved(candidates: dict[str, Callable[[], Any]], warmup: int, rounds: int,
                     on_round: Optional[Callable[[int], None]] = None) -> dict[str, list[float]]:
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            samples[name].append(_timed(candidates[name]))
        if on_round:
            on_round(r)
    return samples


def time_pair(eager: Callable, model, inputs: dict[str, torch.Tensor], rounds: int = 10) -> dict[str, float]:
    """Median ms of eager vs artifact on the same inputs (quick check printed by optimize)."""

    given = as_signature_dtypes(inputs, {io.name: io.spec.dtype for io in model.signature.inputs})
    eager_given = eager_inputs(inputs, model.manifest.decoder)

    def run_eager():
        with torch.inference_mode():
            eager(**eager_given)

    for _ in range(CHOOSING_CALLS):  # the artifact's layers choose their kernels in their first calls
        model.run_dict(given)
    samples = time_interleaved({"eager": run_eager, "artifact": lambda: model.run_dict(given)}, warmup=2, rounds=rounds)
    return {"eager_ms": statistics.median(samples["eager"]) * 1e3,
            "artifact_ms": statistics.median(samples["artifact"]) * 1e3, "rounds": rounds}


def resize_inputs(tensors: dict[str, torch.Tensor], model, sizes: dict[str, int]) -> dict[str, torch.Tensor]:
    """Tile/trim the example inputs along named dynamic dims to the requested sizes."""
    dims = model.signature.dims
    for name, size in sizes.items():
        if name not in dims:
            raise UserInputError(f"--dim {name}: the model has no dynamic dim called {name}",
                                 f"dynamic dims: {', '.join(dims) or 'none (all shapes are fixed)'}")
        if not dims[name].min <= size <= dims[name].max:
            raise UserInputError(f"--dim {name}={size} is outside {dims[name].min}..{dims[name].max}", "pick a size in range")
    out = {}
    for io in model.signature.inputs:
        t = tensors[io.name]
        for axis, d in enumerate(io.spec.shape):
            if isinstance(d, str) and d in sizes:
                reps = -(-sizes[d] // t.shape[axis])
                t = torch.cat([t] * reps, dim=axis).narrow(axis, 0, sizes[d]) if reps > 1 else t.narrow(axis, 0, sizes[d])
        out[io.name] = t.contiguous()
    return out


def _batch_size(model, tensors: dict[str, torch.Tensor]) -> int:
    """The size of the dim named `batch` if the model has one, else 1 (throughput per call)."""
    for io in model.signature.inputs:
        for axis, d in enumerate(io.spec.shape):
            if d == "batch":
                return int(tensors[io.name].shape[axis])
    return 1


def _parse_dims(items: list[str]) -> dict[str, int]:
    sizes = {}
    for item in items:
        name, _, value = item.partition("=")
        value = value.strip()
        if not value.isdigit():
            raise UserInputError(f"--dim {item!r} is not NAME=SIZE", "e.g. --dim batch=16")
        sizes[name.strip()] = int(value)
    return sizes


def _compute_precision(model) -> str:
    """What the artifact's arithmetic really runs in here (a bf16 artifact may compute in float32)."""
    bf16 = model.executor.bf16_compute
    if bf16 is None:
        return model.manifest.dtype
    if bf16 == "bfloat16":
        return f"{model.manifest.dtype} (bf16 parts in bf16)"
    return (f"{model.manifest.dtype} (bf16 parts in float32 from bf16 weights: this CPU has no bf16 arithmetic "
            f"faster than float32)")


def run_bench(artifact: Path, against: Optional[str], inputs_path: Optional[Path], dims: list[str], warmup: int,
              rounds: int, threads: Optional[int], profile: bool, console=None, trust_pickle: bool = False,
              avoid_kernels: tuple[str, ...] = (), device: Optional[str] = None, prompt_tokens: int = 128,
              new_tokens: int = 32) -> dict:
    """device: where the artifact runs (None: the device it was made for). On a GPU the inputs are placed
    there once before timing, every timed call waits for the GPU, and --against runs the eager model there too."""
    from rich.progress import Progress

    from .api import load_artifact
    from .artifact import read_example_inputs
    from .frontend.torch.inputs import load_inputs_file
    from .backends.cpu import malloc
    from .backends.cpu.isa import selected_isa

    if threads:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    model = load_artifact(artifact, avoid_kernels=avoid_kernels, device=device)
    load_ms = (time.perf_counter() - start) * 1e3
    tensors = load_inputs_file(inputs_path, model.signature.input_names) if inputs_path else read_example_inputs(artifact)
    if not tensors:
        raise UserInputError(f"{artifact} stores no example inputs", "pass --inputs inputs.safetensors")
    tensors = resize_inputs(tensors, model, _parse_dims(dims))
    batch = _batch_size(model, tensors)
    on_gpu = model.device != "cpu"
    if on_gpu:  # float inputs wait on the GPU; ids stay on the CPU, as from a tokenizer (checked there, see backends/cuda)
        tensors = {k: (t.to(model.device) if t.is_floating_point() or t.dtype == torch.int8 else t)
                   for k, t in tensors.items()}  # (int8: a KV cache's rows)
        eager_tensors = {k: t.to(model.device) for k, t in eager_inputs(tensors, model.manifest.decoder).items()}
    else:
        eager_tensors = eager_inputs(tensors, model.manifest.decoder)
    wait = _waiter(model.device)

    def run_artifact():
        model.run_dict(tensors)
        wait()

    candidates: dict[str, Callable[[], Any]] = {f"artifact ({model.manifest.dtype})": run_artifact}
    if against:
        from .frontend.torch.sources import SourceRequest, resolve_source

        source = resolve_source(SourceRequest(location=against, trust_pickle=trust_pickle))
        if on_gpu:
            source.module.to(model.device)  # eager_fn, where set, calls the module
        eager = source.eager

        def run_eager():
            with torch.inference_mode():
                eager(**eager_tensors)
            wait()

        candidates["eager (fp32)"] = run_eager
    for _ in range(CHOOSING_CALLS - warmup):  # the artifact's layers choose their kernels in their first calls
        run_artifact()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("timing", total=rounds)
        samples = time_interleaved(candidates, warmup, rounds, on_round=lambda r: progress.advance(task))
    results = []
    for name, values in samples.items():
        median = statistics.median(values)
        results.append({"name": name, "median_ms": median * 1e3, "p90_ms": _p90(values) * 1e3,
                        "throughput": batch / median, "samples_ms": [v * 1e3 for v in values]})
    report = {"artifact": str(artifact), "device": model.device, "batch": batch, "threads": torch.get_num_threads(),
              "isa": model.backend.level() if on_gpu else selected_isa(),
              "rounds": rounds, "warmup": warmup, "load_ms": load_ms, "results": results,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "malloc_tuning": malloc.current().state,
              "compute": _compute_precision(model)}
    if model.manifest.decoder is not None and inputs_path is None and not dims:
        from .decoder_bench import bench_generation

        report["generation"] = bench_generation(model, prompt_tokens, new_tokens, rounds=3)
    if profile:
        report["profile"] = model.profile(tensors)
    if on_gpu:
        report["graphs"] = model.runner.graph_status()
    return report


def _waiter(device: str) -> Callable[[], None]:
    """What a timed call does after its work: wait for the GPU (its kernels finish after the launches return)."""
    if device == "cpu":
        return lambda: None
    return torch.cuda.synchronize
