"""Artifacts on the GPU beside eager PyTorch and torch.compile, in one process (issue: xpu).

For each example model and dtype: convert on this machine's CPU (as a user converts once, anywhere), load
the artifact with device="cuda", and time it beside eager PyTorch (bf16 or fp32 on the GPU) and
torch.compile of the same eager model (`--compile` mode; "max-autotune" and "reduce-overhead" both capture
CUDA graphs). The artifact gets integer inputs (token ids) on the CPU, as from a tokenizer, float inputs
on the GPU; the peers get all inputs on the GPU. Rounds are interleaved; each sample is the mean of `--calls` back-to-back calls ended by one
synchronize (the GPU's own latency per call, launches included), the reported figure is the median sample.
Accuracy: cosine of every output against eager float32 on the GPU. INT8 artifacts are calibrated as
benchmarks/run.py calibrates them (4 batches of 8 built like the inputs with other seeds; real sentences for
minilm), not on random inputs, which misjudge MiniLM's activation ranges (cosine 0.68 on the CPU too).

    python benchmarks/gpu.py --models resnet50,bert-base --dtypes bf16 --batches 1 --compile max-autotune \
        --out benchmarks/results/<name>.md
    python benchmarks/gpu.py --models resnet50 --dtypes int8 --batches 64 --compile none \
        --without triton_int8_gemm_qconv2d    # also the artifact loaded without that kernel factory (an A/B)
    python benchmarks/gpu.py --models resnet50,bert-base --dtypes bf16,int8 --model-batches resnet50=1,64 \
        --model-batches bert-base=1,32    # each model at its own batches
    python benchmarks/gpu.py --models resnet50 --batches 1 --inductor-cache .inductor-cache  # max-autotune's
        # choices kept between device calls (ResNet-50's compiles outlast one call): on a fresh machine, carry
        # `tar -C .inductor-cache -cJf c.tar.xz fxgraph aotautograd cache` (7 MB) and unpack it there first
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import Case, calibration_batches  # noqa: E402
from timing import settle  # noqa: E402

import ipexconvert  # noqa: E402
from ipexconvert.examples import get_example  # noqa: E402

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.bfloat16}  # int8's eager peer: bf16


def _timer(fn, calls: int):
    def sample() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / calls

    return sample


def _flat(result) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, dict):
        return [v for v in result.values() if isinstance(v, torch.Tensor)]
    if hasattr(result, "to_tuple"):
        return [v for v in result.to_tuple() if isinstance(v, torch.Tensor)]
    return [v for v in result if isinstance(v, torch.Tensor)]


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0))


def _print_kernel_profile(fn, rows: int) -> None:
    """GPU time per kernel over 10 calls (torch.profiler; kernels inside graph replays included)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=110), flush=True)


_PEERS: dict = {}  # (model, torch dtype, batch, compile mode) -> (eager model, compiled model, compile seconds)


def bench_case(name: str, dtype: str, batch: int, compile_mode: str, rounds: int, calls: int, folder: Path,
               profile_rows: int = 0, without: Optional[list[str]] = None) -> dict:
    example = get_example(name)
    cpu_inputs = example.example_inputs(batch)
    path = folder / f"{name}.{dtype}.ipxc"
    if not path.exists():
        start = time.perf_counter()
        calibration = calibration_batches(Case(name, name, 8, ""), 4) if dtype == "int8" else None
        ipexconvert.optimize(f"example:{name}", dtype=dtype, output=path, calibration=calibration)
        print(f"  converted {path.name} in {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    model = ipexconvert.load_artifact(path, device="cuda")
    load_s = time.perf_counter() - start
    inputs = {k: v.cuda() for k, v in cpu_inputs.items() if k in model.signature.input_names}
    # The artifact gets integer inputs (token ids) from the CPU, as a tokenizer hands them over: they are
    # checked there before the copy. Given on the GPU, they would be checked there, with a wait per call.
    artifact_inputs = {k: (v if v.is_floating_point() else v.cpu()) for k, v in inputs.items()}
    start = time.perf_counter()
    model.run_dict(inputs)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - start

    eager32 = example.build().eval().cuda()
    with torch.inference_mode():
        want = _flat(eager32(**inputs))
        got = list(model.run_dict(inputs).values())
    cosines = [_cosine(g, w) for g, w in zip(got, want)]

    torch_dtype = TORCH_DTYPES[dtype]
    peer_key = (name, torch_dtype, batch, compile_mode)
    if peer_key not in _PEERS:  # int8's peers are the bf16 model's: built and compiled once for both
        _PEERS.clear()  # one model's peers on the GPU at a time
        _PEERS[peer_key] = (example.build().eval().to(device="cuda", dtype=torch_dtype), None, None)
    eager, compiled, compile_s = _PEERS[peer_key]
    float_inputs = {k: (v.to(torch_dtype) if v.is_floating_point() else v) for k, v in inputs.items()}

    def run_eager():
        with torch.inference_mode():
            eager(**float_inputs)

    candidates = {"artifact": lambda: model.run_dict(artifact_inputs), f"eager {torch_dtype}".replace("torch.", ""): run_eager}
    if without:
        variant = ipexconvert.load_artifact(path, device="cuda", avoid_kernels=without)
        with torch.inference_mode():
            cosines += [_cosine(g, w) for g, w in zip(variant.run_dict(inputs).values(), got)]  # B against A
        candidates["artifact without " + ",".join(without)] = lambda: variant.run_dict(artifact_inputs)
    if compile_mode != "none":
        fresh = compiled is None
        if fresh:
            compiled = torch.compile(eager, mode=compile_mode)

        def run_compiled():
            with torch.inference_mode():
                compiled(**float_inputs)

        if fresh:
            start = time.perf_counter()
            for _ in range(3):
                run_compiled()
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - start
            _PEERS[peer_key] = (eager, compiled, compile_s)
        candidates[f"torch.compile {compile_mode}"] = run_compiled
    samplers = {k: _timer(fn, calls) for k, fn in candidates.items()}
    samples: dict[str, list[float]] = {k: [] for k in samplers}
    for r in range(rounds):
        order = list(samplers) if r % 2 == 0 else list(samplers)[::-1]
        for k in order:
            settle(candidates[k])
            torch.cuda.synchronize()
            samples[k].append(samplers[k]())
    medians = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    if profile_rows:
        _print_kernel_profile(lambda: model.run_dict(artifact_inputs), profile_rows)
        steps = model.profile(artifact_inputs)  # per kernel kind, the GPU synchronized after every step
        for kind, seconds in sorted(steps.items(), key=lambda kv: -kv[1])[:profile_rows]:
            print(f"  step {kind}: {seconds * 1e3:.3f} ms", flush=True)
    return {"model": name, "dtype": dtype, "batch": batch, "medians_ms": medians, "cosines": cosines,
            "load_s": load_s, "first_call_s": first_s, "compile_s": compile_s,
            "graphs": model.runner.graph_status()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet50,bert-base")
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--batches", default="1")
    parser.add_argument("--model-batches", action="append", default=[], metavar="MODEL=B1,B2",
                        help="this model's batches instead of --batches (repeatable), e.g. resnet50=1,64")
    parser.add_argument("--compile", default="max-autotune", choices=["max-autotune", "reduce-overhead", "none"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", type=int, default=0, metavar="ROWS", help="print the top kernels by GPU time")
    parser.add_argument("--without", action="append", metavar="FACTORY",
                        help="also time the artifact loaded without this kernel factory (repeatable)")
    parser.add_argument("--inductor-cache", type=Path, metavar="DIR",
                        help="torch.compile's cache here (TORCHINDUCTOR_CACHE_DIR; Triton's own cubins elsewhere), "
                             "kept between runs: a max-autotune compile cut by a time limit resumes from the choices "
                             "it had benchmarked")
    args = parser.parse_args()
    if args.inductor_cache:
        args.inductor_cache.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(args.inductor_cache.resolve())
        os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-"))  # (large; not kept)
    lines = [f"# GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, ipexconvert {ipexconvert.__version__}",
             f"command: python {' '.join(sys.argv)}", "",
             "| model | dtype | batch | artifact ms | eager ms | compile ms | artifact / compile | cosine vs eager fp32 | "
             "load s | first call s | compile warm-up s |", "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    notes: list[str] = []
    own_batches = dict(entry.split("=", 1) for entry in args.model_batches)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            for batch in (int(b) for b in own_batches.get(name, args.batches).split(",")):
                for dtype in args.dtypes.split(","):  # the dtypes of one batch share the bf16 peers
                    print(f"{name} {dtype} b{batch}", flush=True)
                    r = bench_case(name, dtype, batch, args.compile, args.rounds, args.calls, Path(tmp), args.profile,
                                   args.without)
                    m = r["medians_ms"]
                    art = m["artifact"]
                    eager = next(v for k, v in m.items() if k.startswith("eager"))
                    comp = next((v for k, v in m.items() if k.startswith("torch.compile")), float("nan"))
                    line = (f"| {name} | {dtype} | {batch} | {art:.3f} | {eager:.3f} | {comp:.3f} | {art / comp:.2f} | "
                            f"{', '.join(f'{c:.5f}' for c in r['cosines'])} | {r['load_s']:.2f} | {r['first_call_s']:.2f} | "
                            f"{r['compile_s'] or 0:.1f} |")
                    print(line, r["graphs"], flush=True)
                    lines.append(line)
                    notes += [f"{name} {dtype} b{batch}: {k} {v:.3f} ms, the artifact {art / v:.3f} x that"
                              for k, v in m.items() if k.startswith("artifact without")]
    text = "\n".join(lines + [""] + notes) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
