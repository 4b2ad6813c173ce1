"""What every side-by-side benchmark here shares about timing several systems in one process.

Peers' worker threads keep spinning for a while after a call returns (ONNX Runtime's intra-op pool
spins by default; OpenMP and TBB runtimes do too). On a 2-core machine whatever runs next then shares
the cores with them: our int8 ResNet-50 measured 9.4 ms right after an ONNX Runtime call and 5.4 ms
alone (benchmarks/results/session18-onnx-qdq-xeon-amx.md). A short pause before each timed block lets
the previous system's threads go idle, so each system is timed on a quiet machine; contention itself
is measured on purpose elsewhere (openmp_spin.py, run.py --contention).
"""
from __future__ import annotations

import statistics
import time
from typing import Optional

PAUSE_S = 0.1


def interleaved_samples(variants: dict, rounds: int, calls: int, warmup: int = 2) -> dict[str, list[float]]:
    """Seconds per call of each variant (name -> callable): one sample of `calls` back-to-back calls per variant
    and round, the variants taking turns within a round, so drift on a shared machine hits all alike. For
    kernels of one process; peers with their own spinning threads want `settle` between blocks (onnx_import.py)."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls)
    return samples


def interleaved_us(variants: dict, rounds: int, calls: int, warmup: int = 2) -> dict[str, float]:
    """Median microseconds per call of each variant over interleaved rounds (interleaved_samples)."""
    samples = interleaved_samples(variants, rounds, calls, warmup)
    return {name: statistics.median(s) * 1e6 for name, s in samples.items()}


def layer_pass_row(rows: int, layers: list, theirs, ours, rounds: int, calls: int) -> str:
    """A markdown row: one pass over `layers` (tuples starting with k, n) through theirs(*layer) and through
    ours(*layer), interleaved rounds, medians: rows | their ms | our ms | ours / theirs | their and our T(FL)OP/s."""
    us = interleaved_us({"theirs": lambda: [theirs(*layer) for layer in layers],
                         "ours": lambda: [ours(*layer) for layer in layers]}, rounds=rounds, calls=calls)
    ops = 2 * rows * sum(layer[0] * layer[1] for layer in layers)
    return (f"| {rows} | {us['theirs'] / 1e3:.2f} | {us['ours'] / 1e3:.2f} | {us['ours'] / us['theirs']:.3f} | "
            f"{ops / us['theirs'] / 1e6:.2f} | {ops / us['ours'] / 1e6:.2f} |")


def step_timers(model, recording: Optional[list] = None) -> dict[str, list[float]]:
    """Wrap each executor step of a loaded artifact with a timer (recording while recording[0] is set, always
    without it); node -> the seconds of its calls. Timed where the model runs each step: its inputs as the steps
    before left them, its weights as cold as they are there."""
    samples: dict[str, list[float]] = {}
    for step in model.executor.steps:
        times, kernel = samples.setdefault(step.node, []), step.kernel

        def timed(ins, dims, kernel=kernel, times=times):
            start = time.perf_counter()
            result = kernel(ins, dims)
            if recording is None or recording[0]:
                times.append(time.perf_counter() - start)
            return result
        step.kernel = timed
    return samples


def settle(fn) -> None:
    """Before each timed block of `fn`: let the previous system's spinning threads go idle, then one
    untimed call of `fn`, so the block starts warm (its threads awake, its weights in cache), as
    back-to-back calls of one system are. Without that call each sample was a call after 0.1 s idle:
    our int8 ResNet-50 took 7.7-11.7 ms so against 5.1 ms back to back (session 18)."""
    time.sleep(PAUSE_S)
    fn()


def gpu_graph_ms(fns, replays: int = 10) -> float:
    """GPU milliseconds a call: one call of each of `fns` captured in one CUDA graph and replayed (so the launches'
    CPU cost, which dwarfs a small kernel's, is not counted), the median of `replays` replays over len(fns).
    Warm-up calls (Triton compiles, cuBLAS workspaces) run first, outside the capture."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in fns:
            fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / len(fns))
    return sorted(times)[len(times) // 2]
