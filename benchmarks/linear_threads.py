"""bf16 linear at MiniLM/BERT shapes, one process, by thread count: F.linear against torch's oneDNN linear with the
weight reordered at load (`mkldnn._reorder_linear_weight` with no row count, as kernels/linear.py does, and with the
row count), median ms of 50 calls. Written to find why the artifact's bf16 linears slow down past 8 threads on the
16-core AMX host (results/session30-gpu-h200.md).

    python benchmarks/linear_threads.py --threads 1,2,4,8,16
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

SHAPES = [(128, 384, 1536), (128, 1536, 384), (128, 384, 384), (128, 768, 3072), (128, 3072, 768)]


def timed(fn, calls: int = 50) -> float:
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2,4,8,16")
    args = ap.parse_args()
    lin = torch.ops.mkldnn._linear_pointwise
    reorder = torch.ops.mkldnn._reorder_linear_weight
    print("| threads | rows x in x out | F.linear bf16 | oneDNN packed (None) | oneDNN packed (rows) | F.linear fp32 |")
    print("|---:|---|---:|---:|---:|---:|")
    with torch.inference_mode():
        for t in [int(v) for v in args.threads.split(",")]:
            torch.set_num_threads(t)
            for rows, k, n in SHAPES:
                x = torch.randn(rows, k).bfloat16()
                w = torch.randn(n, k).bfloat16()
                b = torch.randn(n).bfloat16()
                p0, p1 = reorder(w, None), reorder(w, rows)
                x32, w32, b32 = x.float(), w.float(), b.float()
                r = [timed(lambda: torch.nn.functional.linear(x, w, b)),
                     timed(lambda: lin(x, p0, b, "none", [], "")),
                     timed(lambda: lin(x, p1, b, "none", [], "")),
                     timed(lambda: torch.nn.functional.linear(x32, w32, b32))]
                print(f"| {t} | {rows}x{k}x{n} | " + " | ".join(f"{v:.3f}" for v in r) + " |", flush=True)


if __name__ == "__main__":
    main()
