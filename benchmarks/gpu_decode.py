"""Decode on the GPU: a TinyLlama-1.1B-shaped decoder (benchmarks/qwen2_module.py, random weights) converted on this
machine's CPU, loaded with device="cuda", generating over static caches with the decode step replayed from one
captured CUDA graph (runtime/static_cache.py). Beside it, in the same process and interleaved rounds, the same
module in eager torch on the GPU (bf16, a cache grown by torch.cat), and the GPU's measured read bandwidth (a
sum over 4 GiB), which with the bytes of weights a token reads gives each system's share of it.

    python benchmarks/gpu_decode.py --dtypes bf16 --prompt-tokens 512 --new-tokens 32 --rounds 3 \\
        --cache /tmp/gd --out benchmarks/results/sessionNN-gpu-decode.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from qwen2_module import SETTINGS, SHAPES, Qwen2Shaped  # noqa: E402

import ipexconvert  # noqa: E402
from ipexconvert.backends.cuda import attention_prologues, epilogues, float_projections  # noqa: E402
from ipexconvert.backends.cuda.kernels import _triton, sdpa, woq_linear  # noqa: E402
from ipexconvert.examples.decoder_cache import decoder_dynamic_dims, decoder_example_inputs  # noqa: E402


def read_bandwidth(gpu: torch.device) -> float:
    """GB/s of a sum over 4 GiB of bf16 (reads only), the median of 10."""
    x = torch.ones(2 << 30, dtype=torch.bfloat16, device=gpu)
    times = []
    for _ in range(11):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.sum()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    del x
    return (4 << 30) / statistics.median(times[1:]) / 1e9


def weight_bytes_per_token(module: Qwen2Shaped, bytes_per_weight: float) -> float:
    """Bytes of weights one decode token reads: every linear layer and the LM head (the embedding: one row)."""
    count = sum(p.numel() for name, p in module.named_parameters() if p.dim() == 2 and not name.startswith("embed"))
    if module.head is None:
        count += module.embed.weight.numel()  # the tied head reads the whole table
    return count * bytes_per_weight


def eager_decode(module: Qwen2Shaped, prompt: torch.Tensor, new_tokens: int, gpu: torch.device) -> tuple[float, float]:
    """(prefill seconds, median decode seconds a token) of the module itself on the GPU, greedy, a growing cache."""
    shape = module.shape
    cache = {name: torch.zeros(1, shape.kv_heads, 0, shape.head_dim, dtype=torch.bfloat16, device=gpu)
             for name in shape.cache_inputs()}
    ids, times = prompt.to(gpu), []
    with torch.inference_mode():
        for _ in range(new_tokens):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = module(ids, **cache)
            ids = out["logits"][:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            cache = {k.replace("present_", "past_"): v for k, v in out.items() if k.startswith("present_")}
    return times[0], statistics.median(times[1:])


def profile_decode(model, prompt_tokens: int, gpu: torch.device, steps: int = 20) -> None:
    """The GPU kernels of `steps` replayed decode steps, by total GPU time, and their sum beside the wall time."""
    from torch.profiler import ProfilerActivity, profile

    static = model.static_cache
    static.start(torch.randint(1, 1000, (1, prompt_tokens)), prompt_tokens + steps + 2, gpu)
    ids = torch.tensor([[5]])
    static.advance(ids)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            static.advance(ids)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - start) / steps
    total = print_gpu_kernels(prof, steps, 25, show=False)
    graph = next(e.graph for e in static.runner._graphs.values() if e.graph is not None)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        graph.replay()  # back to back: the GPU's own time per step, gaps between its kernels included
    end.record()
    end.synchronize()
    print(f"decode step: wall {wall * 1000:.3f} ms, GPU kernels {total:.3f} ms (profiled), "
          f"graph replays back to back {start.elapsed_time(end) / steps:.3f} ms")
    print_gpu_kernels(prof, steps, 25)


def print_gpu_kernels(prof, calls: int, top: int, show: bool = True) -> float:
    """The profile's `top` GPU kernels by their GPU time a call (printed when `show`); returns all kernels' ms a call."""
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    if show:
        for e in sorted(events, key=lambda e: -e.self_device_time_total)[:top]:
            print(f"{e.self_device_time_total / calls / 1000:8.3f} ms {e.count // calls:5d}x  {e.key[:110]}")
    return sum(e.self_device_time_total for e in events) / calls / 1000


def profile_prefill(model, prompt_tokens: int, vocab: int) -> None:
    """The GPU kernels of one prompt's call (a generate of one token: the prompt, then its arg-max), by total GPU time,
    beside the call's wall time and the CPU's time in the ops that launched them."""
    from torch.profiler import ProfilerActivity, profile

    prompt = torch.randint(1, vocab, (1, prompt_tokens), generator=torch.Generator().manual_seed(99))
    model.generate(prompt, max_new_tokens=1, stop_at_eos=False)  # warm: this prompt length's kernels built
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        model.generate(prompt, max_new_tokens=1, stop_at_eos=False)
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    total = print_gpu_kernels(prof, 1, 20, show=False)
    print(f"prefill of {prompt_tokens}: wall {wall * 1000:.2f} ms, GPU kernels {total:.2f} ms (profiled)")
    print_gpu_kernels(prof, 1, 20)
    cpu = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:12]
    print("CPU side, by self time:")
    for e in cpu:
        print(f"{e.self_cpu_time_total / 1000:8.3f} ms {e.count:5d}x  {e.key[:110]}")


class _Skipped:
    """A Triton kernel that launches nothing: `kernel[grid](...)` returns at once."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


@contextlib.contextmanager
def skipping(kernels: list[str]):
    """Within: the named kernels of backends/cuda/kernels/_triton_jit launch nothing (an ablation: the decode step
    captured meanwhile lacks them, so its time says what they cost with their boundaries; its tokens mean nothing)."""
    module = _triton.jit()
    kept = {name: getattr(module, name) for name in kernels}
    for name in kernels:
        setattr(module, name, _Skipped())
    try:
        yield
    finally:
        for name, kernel in kept.items():
            setattr(module, name, kernel)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama-1.1b")
    ap.add_argument("--dtypes", default="bf16", help=f"comma-separated, of {', '.join(SETTINGS)}; NAME+pdl / NAME+nopdl "
                    "loads NAME with or without programmatic dependent launch (backends/cuda/kernels/_triton.PDL); "
                    "NAME+skip=K1/K2: an ablation, the step captured without those _triton_jit kernels (e.g. "
                    "rope_kv_write_heads, attention_rows): what they cost, boundaries included (garbage tokens); "
                    "NAME+noepilogue / NAME+noattentionprologue / NAME+nofloatprojections: loaded without "
                    "backends/cuda/epilogues.py's / attention_prologues.py's / float_projections.py's rewrite; "
                    "NAME+bf16tile=BLOCK_N/WARPS/PROGRAMS, NAME+floatrun=N: the bits-16 woq_rows tile and run (bf16); NAME+notable: decode steps captured without position tables "
                    "(runtime/position_table.py); NAME+chain / NAME+nochain: greedy steps chained in one "
                    "graph that feeds each arg-max to the next step, or one by one (a replay, then the arg-max and "
                    "copies in and out outside the graph) (runtime/static_cache.CHAINED); NAME+noattentionpdl: attention_rows launched without PDL; NAME+rowchunk=N: woq_linear.ROW_CHUNK; NAME+prefetch / +woqprefetch / +attnprefetch / +noattnprefetch: the codes (woq_rows) and/or the k and v rows (attention_rows) asked into L2 before the PDL wait (the latter on by default), or the latter not; NAME+tile=BLOCK_N/WARPS/PROGRAMS: the float woq_rows tile "
                    "(backends/cuda/kernels/woq_linear.TILES) at load; several joined by +: NAME+attnprefetch+tile=128/4/640")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache", type=Path, required=True, help="folder for the artifacts (kept between runs)")
    ap.add_argument("--out", type=Path, help="write the results here (.json; a .md table beside it)")
    ap.add_argument("--profile", action="store_true", help="then print the GPU kernels of 20 decode steps (torch.profiler)")
    ap.add_argument("--profile-prefill", action="store_true", help="then print the GPU kernels of one prompt's call")
    args = ap.parse_args()
    gpu = torch.device("cuda", torch.cuda.current_device())
    module = Qwen2Shaped(**SHAPES[args.shape])
    args.cache.mkdir(parents=True, exist_ok=True)
    models, rows = {}, {}
    defaults = {"woq_prefetch": woq_linear.L2_PREFETCH, "attn_prefetch": sdpa.L2_PREFETCH,
                "float_run": woq_linear.FLOAT_RUN}  # each variant from these
    for name in args.dtypes.split(","):
        setting, _, variant = name.partition("+")  # "+pdl", "+nopdl": _triton.PDL on or off; "+skip=K1/K2"
        parts = variant.split("+") if variant else []  # several at once: NAME+attnprefetch+tile=128/4/640
        skipped = next((p.partition("skip=")[2].split("/") for p in parts if p.startswith("skip=")), [])
        path = args.cache / f"{args.shape}.{setting}.ipxc"
        if not path.exists():
            start = time.perf_counter()
            example = decoder_example_inputs(module.shape, batch=1, seq=4, past=3)
            ipexconvert.optimize(module, example, dynamic_dims=decoder_dynamic_dims(module.shape, max_batch=4),
                                 output=path, eos_token_ids=[0], **SETTINGS[setting])
            print(f"{path}: converted in {time.perf_counter() - start:.0f} s", flush=True)
        start = time.perf_counter()
        for part in parts:
            if part in ("pdl", "nopdl"):
                _triton.PDL = part == "pdl"  # (the factories read it at load)
        epilogues.ENABLED = "noepilogue" not in parts  # (read at load)
        attention_prologues.ENABLED = "noattentionprologue" not in parts
        float_projections.ENABLED = "nofloatprojections" not in parts
        sdpa.ATTENTION_PDL = "noattentionpdl" not in parts  # (read at load)
        tiles = dict(woq_linear.TILES)
        woq_linear.L2_PREFETCH = bool({"prefetch", "woqprefetch"} & set(parts)) or defaults["woq_prefetch"]
        sdpa.L2_PREFETCH = (bool({"prefetch", "attnprefetch"} & set(parts)) or defaults["attn_prefetch"]) \
            and "noattnprefetch" not in parts
        for part in parts:
            if part.startswith("rowchunk="):
                woq_linear.ROW_CHUNK = int(part.partition("=")[2])
            if part.startswith(("tile=", "bf16tile=")):
                block_n, warps, programs = (int(v) for v in part.partition("=")[2].split("/"))
                woq_linear.TILES["bf16" if part.startswith("bf16") else "float"] = woq_linear.Tile(
                    block_n=block_n, chunk=128, warps=warps, programs=programs)
            if part.startswith("floatrun="):
                woq_linear.FLOAT_RUN = int(part.partition("=")[2])
        model = ipexconvert.load_artifact(path, device="cuda")
        epilogues.ENABLED = attention_prologues.ENABLED = float_projections.ENABLED = True
        woq_linear.FLOAT_RUN = defaults["float_run"]
        woq_linear.TILES.update(tiles)
        woq_linear.ROW_CHUNK = 1024
        woq_linear.L2_PREFETCH, sdpa.L2_PREFETCH = defaults["woq_prefetch"], defaults["attn_prefetch"]
        sdpa.ATTENTION_PDL = True
        assert model.static_cache is not None, model.static_cache_refusal
        model.static_cache.runner.position_tables = "notable" not in parts
        if {"chain", "nochain"} & set(parts):
            model.static_cache.chained = "chain" in parts
        load = time.perf_counter() - start
        assert model.static_cache is not None, model.static_cache_refusal
        start = time.perf_counter()
        with skipping(skipped):
            model.generate(torch.arange(1, 9)[None], max_new_tokens=4, stop_at_eos=False)  # the decode step's capture
            if skipped:  # captured again at the rounds' cache capacity while the kernels are skipped
                model.generate(torch.randint(1, 1000, (1, args.prompt_tokens)), max_new_tokens=args.new_tokens,
                               stop_at_eos=False)
        first = time.perf_counter() - start
        models[name] = model
        rows[f"ipexconvert {name}"] = {"load_s": load, "first_generate_s": first, "prefill": [], "decode": [],
                                       "graphs": model.static_cache.runner.graph_status()}
        print(f"{name}: loaded in {load:.1f} s, first generate (capture) {first:.1f} s", flush=True)
    eager = Qwen2Shaped(**SHAPES[args.shape]).to(gpu, torch.bfloat16)
    rows["torch eager bf16"] = {"prefill": [], "decode": []}
    bandwidth = []
    for r in range(args.rounds):
        prompt = torch.randint(1, SHAPES[args.shape]["vocab"], (1, args.prompt_tokens),
                               generator=torch.Generator().manual_seed(r))
        bandwidth.append(read_bandwidth(gpu))
        tokens = {}
        for name, model in models.items():
            result = model.generate(prompt, max_new_tokens=args.new_tokens, stop_at_eos=False)
            setting, _, variant = name.partition("+")
            tokens.setdefault(setting, result.new_ids)
            # a launch variant must not change the tokens (an ablation does)
            if "skip=" not in variant and result.new_ids != tokens[setting]:
                print(f"round {r}: {name}'s greedy tokens differ from {setting}'s", flush=True)
            rows[f"ipexconvert {name}"]["prefill"].append(result.prefill_seconds)
            rows[f"ipexconvert {name}"]["decode"].append(result.decode_ms_per_token / 1000)
        prefill, decode = eager_decode(eager, prompt, args.new_tokens, gpu)
        rows["torch eager bf16"]["prefill"].append(prefill)
        rows["torch eager bf16"]["decode"].append(decode)
        print(f"round {r}: " + ", ".join(f"{k} {v['decode'][-1] * 1000:.3f} ms" for k, v in rows.items()), flush=True)
    gbps = statistics.median(bandwidth)
    width = {"fp32": 4, "bf16": 2, "int8": 1, "int8-a8": 1, "int4": 0.5, "int4-a8": 0.5, "int4-bf16": 0.5}
    lines = [f"GPU: {torch.cuda.get_device_name(gpu)}, torch {torch.__version__}, read bandwidth {gbps:.0f} GB/s "
             f"(median of {args.rounds}); {args.shape}, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, "
             f"median of {args.rounds} rounds", "",
             "| system | weights a token | prefill | decode ms/token | share of bandwidth |", "|---|---:|---:|---:|---:|"]
    for key, row in rows.items():
        dtype = key.split()[-1].split("+")[0].split("-kv")[0]  # (the KV cache's format does not change the weights)
        size = weight_bytes_per_token(module, width[dtype])
        decode = statistics.median(row["decode"])
        row.update(prefill_s=statistics.median(row["prefill"]), decode_ms=decode * 1000, weight_mb=size / 1e6,
                   bandwidth_share=size / decode / 1e9 / gbps)
        lines.append(f"| {key} | {size / 1e6:.0f} MB | {row['prefill_s']:.3f} s | {row['decode_ms']:.3f} | "
                     f"{row['bandwidth_share']:.2f} |")
    print("\n".join(lines))
    if args.profile:
        for name, model in models.items():
            print(f"{name}:")
            profile_decode(model, args.prompt_tokens, gpu)
    if args.profile_prefill:
        for name, model in models.items():
            print(f"{name}:")
            profile_prefill(model, args.prompt_tokens, SHAPES[args.shape]["vocab"])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "read_gbps": gbps, "rows": rows}, indent=1))
        args.out.with_suffix(".md").write_text("\n".join(lines) + f"\n\nCommand: `python {' '.join(sys.argv)}`\n")


if __name__ == "__main__":
    main()
