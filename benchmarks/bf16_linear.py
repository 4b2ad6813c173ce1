"""bf16 linear from bf16 storage (CPUs without bf16 arithmetic): our bf16_gemm against MKL's packed sgemm on the
same weights in float32 (GFLOP/s; 9 interleaved rounds), and a decode step's bf16_gemv calls back to back (a Qwen2-0.5B shape:
24 layers' four weights and the LM head, 988 MB) against the one-pass read bandwidth, in one process.

    python benchmarks/bf16_linear.py [--threads 2] [--level avx512_vnni]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ipexconvert.backends.cpu import native_lib
from ipexconvert.decoder_bench import read_bandwidth_gbs
from timing import interleaved_samples  # benchmarks/ is on sys.path as the script's folder

GEMM_SHAPES = [(240, 256, 256), (480, 512, 512), (512, 4096, 896), (512, 896, 4864),  # m, n, k
               (512, 9728, 896), (512, 1152, 896),  # Qwen2-0.5B's merged gate/up and q/k/v
               (512, 4864, 896)]  # its gate or up alone (the CPU's graph: 304 panels, an uneven split until session 64)
DECODE_LAYER = [(1152, 896), (896, 896), (9728, 896), (896, 4864)]  # Qwen2-0.5B: qkv, o, gate/up, down


def gemm_table(level: str, threads: int) -> None:
    lib = native_lib.raw
    print("| m x n x k | MKL sgemm, float32 weight (GFLOP/s, median) | torch F.linear float32 (GFLOP/s) | "
          "bf16_gemm, bf16 weight (GFLOP/s, median) | bf16_gemm time / MKL's (median of rounds) |")
    print("|---|---:|---:|---:|---:|")
    for m, n, k in GEMM_SHAPES:
        x = torch.randn(m, k).bfloat16()
        x32, w32 = x.float(), torch.randn(n, k)
        w = w32.bfloat16()
        out = torch.empty(m, n, dtype=torch.bfloat16)
        packed = torch.ops.mkl._mkl_reorder_linear_weight(w32, m)
        flops, reps = 2.0 * m * n * k, max(3, int(2e9 / (2 * m * n * k)))
        samples = interleaved_samples({"mkl": lambda: torch.ops.mkl._mkl_linear(x32, packed, w32, None, m),
                                       "torch": lambda: torch.nn.functional.linear(x32, w32),
                                       "ours": lambda: lib.bf16_gemm(x, w, None, out, level, threads)}, 9, reps)
        mkl, plain, ours = samples["mkl"], samples["torch"], samples["ours"]
        ratio = statistics.median(b / a for a, b in zip(mkl, ours))
        print(f"| {m} x {n} x {k} | {flops / statistics.median(mkl) / 1e9:.0f} | "
              f"{flops / statistics.median(plain) / 1e9:.0f} | {flops / statistics.median(ours) / 1e9:.0f} | "
              f"{ratio:.2f} |")


def decode_bandwidth(level: str, threads: int) -> None:
    lib = native_lib.raw
    shapes = DECODE_LAYER * 24 + [(151936, 896)]
    weights = [torch.randn(n, k).bfloat16() for n, k in shapes]
    xs = {k: torch.randn(1, k).bfloat16() for _, k in DECODE_LAYER}
    outs = [torch.empty(1, n, dtype=torch.bfloat16) for n, _ in shapes]
    nbytes = sum(w.numel() * 2 for w in weights)

    def token():
        for w, o in zip(weights, outs):
            lib.bf16_gemv(xs[w.shape[1]], w, None, o, level, threads)

    token()
    token_times = []
    for _ in range(15):
        start = time.perf_counter()
        token()
        token_times.append(time.perf_counter() - start)
    t, bw = statistics.median(token_times), read_bandwidth_gbs(1024)
    print(f"\ndecode GEMVs ({nbytes / 1e6:.0f} MB): median {t * 1e3:.1f} ms, {nbytes / t / 1e9:.1f} GB/s = "
          f"{nbytes / t / 1e9 / bw:.2f} of the one-pass sum's {bw:.1f} GB/s (read_bandwidth_gbs, right after)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--level", default=None, help="ISA level of our kernels (default: this CPU's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    level = args.level or native_lib.selected_level()
    print(f"level {level}, {args.threads} threads, torch {torch.__version__}\n")
    gemm_table(level, args.threads)
    decode_bandwidth(level, args.threads)


if __name__ == "__main__":
    main()
