"""How an artifact and eager PyTorch scale with the number of CPU threads, one fresh process per thread count,
with the artifact's time per kernel kind, and optionally oneDNN's own log of each primitive it ran.

Written after session 30 saw, on the GPU machine's 16-core AMX Xeon, MiniLM bf16 take 15.3 ms with 16 threads
and 6.7 ms with 8 (eager float32: 9.6 ms with 16), the linear layers (torch's oneDNN) 10.0 ms with 16 threads
and 4.4 with 2 (`results/session30-gpu-h200.md`). Each process: load with `threads=N`, interleaved rounds of the
artifact, eager float32 and eager bf16 (median of per-round means), then one profiled run. `--onednn-verbose N`
adds a process with ONEDNN_VERBOSE=1 at N threads: which implementation ran each primitive, with what shapes,
in how long (the artifact's calls after warm-up only). Each timing process also times one oneDNN linear alone after
the artifact ran (if that is fast and the artifact's linears are slow, the cause is what runs around them).
`--churn N` counts, per kernel kind, the threads OpenMP creates while it runs (libgomp re-creates a pool's threads
whenever a bigger team follows a smaller one: results/session31-amx-host-threads.md); `--avoid` leaves kernel
families out, as load_artifact's avoid_kernels does.

    python benchmarks/cpu_threads.py --model minilm --dtype bf16 --threads 1,2,4,8,16 --onednn-verbose 16,2 --churn 16
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARK = "=== timed calls ==="


def child(path: str, model_name: str, threads: int, rounds: int, calls: int, mode: str, avoid: list[str]) -> None:
    """One process at one thread count. mode: "time" (rounds, a lone linear, a profile), "verbose" (calls for
    ONEDNN_VERBOSE) or "churn" (threads created per kernel kind)."""
    import ipexconvert  # before torch: the OpenMP settings apply
    import torch

    from ipexconvert.examples import get_example

    example = get_example(model_name)
    model = ipexconvert.load_artifact(path, threads=threads, avoid_kernels=avoid)
    inputs = {k: v for k, v in example.example_inputs(1).items() if k in model.signature.input_names}
    if mode == "churn":
        model.run_dict(inputs)
        churn(model, inputs, calls)
        return
    if mode == "verbose":
        for _ in range(3):
            model.run_dict(inputs)
        print(MARK, flush=True)
        for _ in range(calls):
            model.run_dict(inputs)
        sys.stdout.flush()
        return
    torch.set_num_threads(threads)
    eager32 = example.build().eval()
    eager16 = example.build().eval().to(torch.bfloat16)
    inputs16 = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in inputs.items()}
    systems = {"artifact": lambda: model.run_dict(inputs)}
    with torch.inference_mode():
        systems["eager fp32"] = lambda: eager32(**inputs)
        systems["eager bf16"] = lambda: eager16(**inputs16)
        samples = {k: [] for k in systems}
        for r in range(rounds):
            for name in (list(systems) if r % 2 == 0 else list(systems)[::-1]):
                fn = systems[name]
                time.sleep(0.1)
                fn()
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples[name].append((time.perf_counter() - start) / calls * 1e3)
    steps = model.profile(inputs)
    print(json.dumps({"threads": threads, "torch_threads": torch.get_num_threads(),
                      "medians_ms": {k: statistics.median(v) for k, v in samples.items()},
                      "lone_linear_ms": lone_linear_ms(),
                      "steps_ms": {k: v * 1e3 for k, v in sorted(steps.items(), key=lambda kv: -kv[1])}}))


def churn(model, inputs: dict, calls: int) -> None:
    """Per kernel kind over `calls` runs: threads created while it ran, and the process's thread count after it.
    libgomp ends surplus threads when a team smaller than the last one starts and creates them again for the next
    bigger one, so a kind that leaves fewer threads alive runs a smaller team, and the kind after it pays."""
    tasks = lambda: set(os.listdir("/proc/self/task"))  # noqa: E731
    stats: dict[str, list] = collections.defaultdict(lambda: [0, 0, 10**9, 0])  # calls, created, min/max alive
    for step in model.runner.main:
        def counted(args, dims, kernel=step.kernel, name=step.kernel_name):
            before = tasks()
            out = kernel(args, dims)
            after = tasks()
            s = stats[name]
            s[0] += 1
            s[1] += len(after - before)
            s[2], s[3] = min(s[2], len(after)), max(s[3], len(after))
            return out
        step.kernel = counted
    for _ in range(calls):
        model.run_dict(inputs)
    for name, (n, created, low, high) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name}: {n} calls, {created} threads created, {low}-{high} threads alive after it")


def lone_linear_ms() -> dict[str, float]:
    """One bf16 oneDNN linear (MiniLM's FFN up-projection, 128 x 384 -> 1536) timed alone in this process,
    after the artifact ran: if it is slow here and fast in a fresh process, process state (threads, AMX) is why."""
    import torch

    x, w = torch.randn(128, 384).bfloat16(), torch.randn(1536, 384).bfloat16()
    packed = torch.ops.mkldnn._reorder_linear_weight(w, None)
    out = {}
    with torch.inference_mode():
        for name, fn in (("oneDNN packed", lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")),
                         ("F.linear", lambda: torch.nn.functional.linear(x, w))):
            for _ in range(5):
                fn()
            samples = []
            for _ in range(50):
                start = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - start) * 1e3)
            out[name] = statistics.median(samples)
    return out


def onednn_summary(text: str, top: int) -> list[str]:
    """exec lines of ONEDNN_VERBOSE after the mark, summed per (primitive, implementation, shapes)."""
    totals: dict[tuple[str, str, str], list[float]] = collections.defaultdict(list)
    for line in text.split(MARK, 1)[-1].splitlines():
        fields = line.split(",")
        if not line.startswith("onednn_verbose") or "exec" not in fields:
            continue
        at = fields.index("exec")
        try:
            ms = float(fields[-1])
        except ValueError:
            continue
        totals[(fields[at + 2], fields[at + 3], fields[-2])].append(ms)
    rows = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:top]
    return [f"  {sum(v):8.3f} ms  {len(v):4d} calls  {kind} {impl} {shape}" for (kind, impl, shape), v in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--artifact", type=Path, help="an existing artifact of --model (default: convert one)")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--steps", type=int, default=6, help="kernel kinds to show per thread count")
    ap.add_argument("--onednn-verbose", default="", metavar="THREADS", help="thread counts to log oneDNN at")
    ap.add_argument("--avoid", default="", help="kernel families not to use, comma-separated (avoid_kernels)")
    ap.add_argument("--child", nargs=3, metavar=("PATH", "MODEL", "THREADS"), help=argparse.SUPPRESS)
    ap.add_argument("--churn", default="", metavar="THREADS",
                    help="thread counts at which to count, per kernel kind, the threads OpenMP creates while it runs")
    ap.add_argument("--child-mode", choices=("time", "verbose", "churn"), default="time", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.rounds, args.calls, args.child_mode,
              [a for a in args.avoid.split(",") if a])
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = args.artifact
        if path is None:
            import ipexconvert

            path = Path(tmp) / f"{args.model}.{args.dtype}.ipxc"
            extra = {"calib_synthetic": True} if args.dtype == "int8" else {}
            ipexconvert.optimize(f"example:{args.model}", dtype=args.dtype, output=path, **extra)
        base = [sys.executable, __file__, "--rounds", str(args.rounds), "--calls", str(args.calls),
                "--avoid", args.avoid]
        print(f"{args.model} {args.dtype}, batch 1, {os.cpu_count()} CPUs; median of {args.rounds} rounds of "
              f"{args.calls} calls, ms")
        print("| threads | artifact | eager fp32 | eager bf16 | lone linear after it (packed / F.linear) "
              "| slowest kernel kinds (one profiled run) |")
        print("|---:|---:|---:|---:|---|---|")
        for threads in args.threads.split(","):
            out = subprocess.run(base + ["--child", str(path), args.model, threads], capture_output=True, text=True)
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if out.returncode or not lines:
                print(f"| {threads} | failed: {out.stderr.strip().splitlines()[-1:]} | | | |", flush=True)
                continue
            r = json.loads(lines[-1])
            m = r["medians_ms"]
            steps = ", ".join(f"{k} {v:.2f}" for k, v in list(r["steps_ms"].items())[:args.steps])
            lone = " / ".join(f"{v:.3f}" for v in r["lone_linear_ms"].values())
            print(f"| {threads} | {m['artifact']:.2f} | {m['eager fp32']:.2f} | {m['eager bf16']:.2f} | {lone} "
                  f"| {steps} |", flush=True)
        for threads in filter(None, args.onednn_verbose.split(",")):
            env = dict(os.environ, ONEDNN_VERBOSE="1")
            out = subprocess.run(base + ["--child", str(path), args.model, threads, "--child-mode", "verbose"],
                                 capture_output=True, text=True, env=env)
            print(f"\noneDNN primitives, {threads} threads, {args.calls} calls after warm-up:")
            print("\n".join(onednn_summary(out.stdout, 12)) or f"  none logged (rc {out.returncode})", flush=True)
        for threads in filter(None, args.churn.split(",")):
            out = subprocess.run(base + ["--child", str(path), args.model, threads, "--child-mode", "churn"],
                                 capture_output=True, text=True)
            print(f"\nthreads created per kernel kind, {threads} threads, {args.calls} calls:")
            print(out.stdout.rstrip() or f"  failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)


if __name__ == "__main__":
    main()
