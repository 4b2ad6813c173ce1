"""What a decode step costs beyond reading its weights, measured from outside the profile (whose per-step timers
charge the cache misses after each weight stream to whichever step runs first).

A decoder artifact is prefilled with a random prompt; then, in one process and in interleaved rounds:
1. the whole step, run through the executor and from the bound plan generate() uses (runtime/bound_plan.py), and
   from a bound plan without recorded steps (each cache append, attention and position step a Python entry),
   against every native call one executor step made, replayed back to back with the same arguments (no Python
   between them: what a native loop would take), and against the step's weight-only GEMVs alone, and the GEMVs'
   bytes over that time;
2. the GEMVs again with one small operation after each: nothing, a native rms_norm into a buffer made once, the
   same with a fresh output tensor each call, torch's rms_norm: what a step after a weight stream costs.
3. the native calls replayed without one kind at a time (rms_norm, decode_attention, ...): what each kind adds to
   a step between the weight streams (its outputs hold the previous replay's values, so what reads them still
   reads numbers).
4. each kind's calls timed one by one inside a replay of the step (in context), beside one of its calls alone and
   warm (the same call back to back) and alone after a 64 MB read has evicted the caches: what a small step's cost
   in a decode step owes to cold memory.
(Making a kernel's call a no-op inside the whole step is no measure of it: its outputs stay unwritten, and what
reads them then computes on whatever the memory held: on an AMX CPU that doubled an int8-a8 step.)

    python benchmarks/decode_step_costs.py model.ipxc [--prompt 512] [--rounds 15]
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

from ipexconvert.api import load_artifact
from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.kernels import woq_linear
from ipexconvert.decoder_bench import read_bandwidth_gbs
from ipexconvert.runtime import bound_plan
from ipexconvert.runtime.decoder import GrowingCache

from decode_profile import after_prompt  # benchmarks/ is on the path when run as a script


def median_ms(samples: list[float]) -> float:
    return 1e3 * statistics.median(samples)


def timed(call, repeat: int) -> float:
    """Median seconds of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def capture_gemvs(cache: GrowingCache, step: torch.Tensor) -> list:
    """(layer, rows, residual) of every weight-only GEMV one decode step makes, in order."""
    calls, original = [], woq_linear.WoqGemm.__call__

    def record(self, rows, residual=None):
        calls.append((self, rows.clone(), None if residual is None else residual.clone()))
        return original(self, rows, residual)

    woq_linear.WoqGemm.__call__ = record
    cache.bind_steps = False  # (a bound plan's GEMVs are bound native calls: WoqGemm is not called)
    try:
        cache.advance(step)
    finally:
        woq_linear.WoqGemm.__call__ = original
    return calls


class RecordingLib:
    """Stands in for the native module (before the artifact is loaded, so the kernels take it): records each call's
    function and arguments while `calls` is a list."""

    def __init__(self, lib):
        self.lib, self.calls = lib, None

    def __getattr__(self, name: str):
        fn = getattr(self.lib, name)

        def call(*args, **kwargs):
            if self.calls is not None:
                bound = fn
                if kwargs:  # (replays call fn(*args) and read fn.__name__: the keywords go into a partial)
                    bound = functools.partial(fn, **kwargs)
                    bound.__name__ = name
                self.calls.append((bound, args))
            return fn(*args, **kwargs)

        return call


def capture_native_calls(recorder: RecordingLib, cache: GrowingCache, step: torch.Tensor) -> list:
    recorder.calls, cache.bind_steps = [], False
    try:
        cache.advance(step)
        return recorder.calls
    finally:
        recorder.calls = None


def replay(calls: list) -> None:
    for fn, args in calls:
        fn(*args)


def gemv_sweep(gemvs: list, threads: int, small=lambda: None):
    """(a call running every captured GEMV back to back, `small()` after each, into outputs made once; those
    outputs)."""
    outs = [torch.empty((*rows.shape[:-1], layer.n)) for layer, rows, _ in gemvs]

    def sweep() -> None:
        for (layer, rows, residual), out in zip(gemvs, outs):
            native_lib.raw.woq_gemm(rows, layer.packed, layer.n, layer.bits, layer.group_size, layer.qparams,
                                    layer.has_zero, layer.bias, out, layer.isa, threads, layer.integer_path or 0,
                                    residual)
            small()
    return sweep, outs


def step_with(cache: GrowingCache, step: torch.Tensor, bound: bool):
    def call():
        cache.bind_steps = bound
        cache.advance(step)
    return call


def step_arguments(doc: str) -> argparse.Namespace:
    """The decode-step scripts' command line (an artifact, --prompt, --threads, --rounds); sets torch's threads."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifact")
    ap.add_argument("--prompt", type=int, default=512, help="cached positions before the timed steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    return args


def main() -> None:
    args = step_arguments(__doc__)
    # The replayed calls come from a first load whose kernels call through the recorder; the timed steps run a
    # second load that calls the native module itself.
    lib = native_lib.raw
    recorder = native_lib.raw = RecordingLib(lib)
    recorded_cache, recorded_step = after_prompt(load_artifact(args.artifact), args.prompt)
    native_calls = capture_native_calls(recorder, recorded_cache, recorded_step)
    native_lib.raw = lib
    model = load_artifact(args.artifact)
    cache, step = after_prompt(model, args.prompt)
    record = bound_plan.BoundPlan._record  # (a third load whose plan records none of its varying steps)
    bound_plan.BoundPlan._record = lambda *a, **k: False
    try:
        unrecorded_cache, _ = after_prompt(load_artifact(args.artifact), args.prompt)
    finally:
        bound_plan.BoundPlan._record = record
    gemvs = capture_gemvs(cache, step)
    if not gemvs:
        raise SystemExit(f"{args.artifact} makes no weight-only GEMV on this CPU: nothing to compare")
    raw = native_lib.raw
    weight_bytes = sum(layer.packed.numel() * layer.packed.element_size() + layer.qparams.numel() * 4
                       for layer, _, _ in gemvs)
    isa = gemvs[0][0].isa
    x, w = torch.randn(1, 1, 896), torch.ones(896)
    y = torch.empty_like(x)
    after = {
        "nothing": lambda: None,
        "native rms_norm, output made once": lambda: raw.rms_norm(x, None, w, 1e-6, y, None, isa, args.threads),
        "native rms_norm, fresh output": lambda: raw.rms_norm(x, None, w, 1e-6, torch.empty_like(x), None, isa,
                                                              args.threads),
        "torch rms_norm": lambda: torch.nn.functional.rms_norm(x, (896,), w, 1e-6),
    }
    sweeps = {name: gemv_sweep(gemvs, args.threads, small)[0] for name, small in after.items()}

    kinds = sorted({fn.__name__ for fn, _ in native_calls} - {"woq_gemm"})
    without = {kind: [(fn, a) for fn, a in native_calls if fn.__name__ != kind] for kind in kinds}
    results: dict[str, list[float]] = {"whole step": [], "whole step, bound plan": [], "no recorded steps": [],
                                       "native calls replayed": [], **{f"without {k}": [] for k in kinds},
                                       **{f"GEMVs + {k}": [] for k in after}}
    for _ in range(args.rounds):
        results["whole step"].append(timed(step_with(cache, step, bound=False), 4))
        results["whole step, bound plan"].append(timed(step_with(cache, step, bound=True), 4))
        results["no recorded steps"].append(timed(step_with(unrecorded_cache, step, bound=True), 4))
        results["native calls replayed"].append(timed(lambda: replay(native_calls), 4))
        for kind, calls in without.items():
            results[f"without {kind}"].append(timed(lambda: replay(calls), 4))
        for name, small in after.items():
            results[f"GEMVs + {name}"].append(timed(sweeps[name], 2))
    bandwidth = read_bandwidth_gbs()
    whole = results["whole step"]
    alone = median_ms(results["GEMVs + nothing"])
    print(f"{args.artifact}: {len(gemvs)} GEMVs, {weight_bytes / 1e6:.0f} MB of packed weights a step, ~{args.prompt} "
          f"cached positions, {args.threads} threads, {args.rounds} interleaved rounds; read bandwidth {bandwidth:.1f} GB/s")
    print("| measured | median ms | note |\n|---|---:|---|")
    print(f"| whole step (executor) | {median_ms(whole):.2f} | {weight_bytes / 1e6 / median_ms(whole):.1f} GB/s of weights |")
    bound = median_ms(results["whole step, bound plan"])
    ratio = statistics.median(b / w for b, w in zip(results["whole step, bound plan"], whole))
    print(f"| whole step (bound plan) | {bound:.2f} | {weight_bytes / 1e6 / bound:.1f} GB/s of weights, "
          f"{weight_bytes / 1e6 / bound / bandwidth:.2f} of the read bandwidth; {ratio:.3f} x the executor's "
          f"(median of the rounds' ratios) |")
    unrecorded = median_ms(results["no recorded steps"])
    ratio = statistics.median(b / u for b, u in zip(results["whole step, bound plan"], results["no recorded steps"]))
    print(f"| whole step (bound plan, no recorded steps) | {unrecorded:.2f} | the bound plan's is {ratio:.3f} x this "
          f"(median of the rounds' ratios) |")
    replayed = median_ms(results["native calls replayed"])
    print(f"| the step's {len(native_calls)} native calls replayed back to back | {replayed:.2f} | "
          f"{weight_bytes / 1e6 / replayed / bandwidth:.2f} of the read bandwidth |")
    for kind, calls in without.items():
        m = median_ms(results[f"without {kind}"])
        count = len(native_calls) - len(calls)
        print(f"| replayed without its {count} {kind} | {m:.2f} | the {kind} calls add {replayed - m:.2f} ms, "
              f"{1e3 * (replayed - m) / count:.1f} us each |")
    print(f"| GEMVs alone (native calls back to back) | {alone:.2f} | "
          f"{weight_bytes / 1e6 / alone:.1f} GB/s, {weight_bytes / 1e6 / alone / bandwidth:.2f} of the read bandwidth |")
    for name in list(after)[1:]:
        m = median_ms(results[f"GEMVs + {name}"])
        print(f"| GEMVs + {name} after each | {m:.2f} | +{1e3 * (m - alone) / len(gemvs):.1f} us a call |")
    print()
    per_call_costs(native_calls, args.rounds)


def per_call_costs(native_calls: list, rounds: int) -> None:
    """Table 4 of the docstring: per kind, microseconds a call in context, alone warm, alone after a 64 MB read."""
    in_context: dict[str, list[float]] = {}
    for _ in range(rounds):
        spent: dict[str, float] = {}
        for fn, a in native_calls:
            start = time.perf_counter()
            fn(*a)
            spent[fn.__name__] = spent.get(fn.__name__, 0.0) + time.perf_counter() - start
        for kind, seconds in spent.items():
            in_context.setdefault(kind, []).append(seconds)
    big = torch.ones((64 << 20) // 4)
    print("| kind | calls a step | in context us a call | alone, warm | alone, after a 64 MB read |")
    print("|---|---:|---:|---:|---:|")
    for kind, samples in in_context.items():
        calls = [(fn, a) for fn, a in native_calls if fn.__name__ == kind]
        fn, a = calls[len(calls) // 2]
        cold = []
        for _ in range(20):
            big.sum()
            start = time.perf_counter()
            fn(*a)
            cold.append(time.perf_counter() - start)
        print(f"| {kind} | {len(calls)} | {1e6 * statistics.median(samples) / len(calls):.1f} | "
              f"{1e6 * timed(lambda: fn(*a), 100):.1f} | {1e6 * statistics.median(cold):.1f} |")


if __name__ == "__main__":
    main()
