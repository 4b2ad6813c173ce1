"""How close a decode token's integer GEMVs alone come to the read bandwidth: every linear layer of a
Qwen2-0.5B-shaped decoder (24 layers: merged qkv, o, merged gate/up, down) as one-row woq_gemm calls on its
integer path (int8-a8: path 4, 8-bit codes per channel; int4-a8: path 5, 4-bit codes in groups of 128), the
layers' weights cycled in order so that none is in cache, as in a decode step. Reports GB/s of codes and scales
read, and their share of a read-only pass measured in the same run (interleaved rounds, medians):

    python benchmarks/woq_gemv_stream.py [--bits 8,4] [--threads 2] [--rounds 5] [--hot] [--levels amx,avx512_vnni]

--hot adds the kernels' in-cache rate: the first layer's qkv and o weights (0.5 and 0.4 MB at int4, inside a
core's L2 on the Xeons here) called over and over, so no byte comes from memory: what the kernel computes a second
when nothing waits on DRAM, the ceiling a streaming GEMV cannot pass whatever the bandwidth. --levels runs the
kernels capped to each of these ISA levels in the same interleaved rounds (a kernel's builds side by side).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ipexconvert.backends.cpu.kernels.woq_linear import pack_woq_weight
from ipexconvert.backends.cpu.native_lib import _lib, kernel_level
from ipexconvert.decoder_bench import read_bandwidth_gbs

LAYER_SHAPES = [(1152, 896), (896, 896), (9728, 896), (896, 4864)]  # n, k: qkv, o, gate/up, down
LAYERS = 24
GROUP_4BIT = 128


def layer_weights(bits: int, seed: int) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    weights = []
    for _ in range(LAYERS):
        for n, k in LAYER_SHAPES:
            group = k if bits == 8 else GROUP_4BIT
            codes = (torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8) if bits == 8 else
                     torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.uint8))
            scales = torch.rand(n, k // group, generator=g) * 0.01 + 0.001
            packed, qparams, has_zero = pack_woq_weight(codes, scales, None, bits, group, integer_layout=True)
            weights.append((n, k, group, packed, qparams, has_zero, torch.randn(1, k, generator=g), torch.empty(1, n)))
    return weights


def sweep(lib, weights: list[tuple], bits: int, threads: int, level: str = "") -> float:
    """Seconds for one pass over every layer ("" level: the selected one)."""
    path = 4 if bits == 8 else 5
    start = time.perf_counter()
    for n, k, group, packed, qparams, has_zero, x, y in weights:
        lib.woq_gemm(x, packed, n, bits, group, qparams, has_zero, None, y, level, threads, path)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bits", default="8,4")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hot", action="store_true", help="also time the qkv and o GEMVs of one layer with their weights "
                    "in cache (the compute ceiling)")
    ap.add_argument("--levels", default="", help="comma-separated ISA levels to cap the kernels to, side by side "
                    "(default: the selected level only)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lib = _lib()
    sets = {int(b): layer_weights(int(b), 7) for b in args.bits.split(",")}
    levels = args.levels.split(",")
    runs = [(b, level) for b in sets for level in levels]
    nbytes = {b: sum(w[3].numel() * w[3].element_size() + w[4].numel() * 4 for w in ws) for b, ws in sets.items()}
    samples = {run: [] for run in runs}
    bandwidth = []
    hot = {b: ws[:2] * 48 for b, ws in sets.items()}  # layer 0's qkv and o, again and again
    hot_bytes = {b: sum(w[3].numel() * w[3].element_size() + w[4].numel() * 4 for w in ws) for b, ws in hot.items()}
    hot_samples = {run: [] for run in runs}
    for b, level in runs:
        sweep(lib, sets[b], b, args.threads, level)
    for _ in range(args.rounds):
        bandwidth.append(read_bandwidth_gbs())
        for b, level in runs:
            samples[(b, level)].extend(sweep(lib, sets[b], b, args.threads, level) for _ in range(3))
            if args.hot:
                hot_samples[(b, level)].extend(sweep(lib, hot[b], b, args.threads, level) for _ in range(3))
    bw = statistics.median(bandwidth)

    def label(b: int, level: str) -> str:
        name = "int8 per channel" if b == 8 else f"int4 g{GROUP_4BIT}"
        return f"{name} ({level})" if level else name

    print(f"woq_gemm level {kernel_level('woq_gemm_w4a8')}, {args.threads} threads, read bandwidth {bw:.1f} GB/s "
          f"(median of {len(bandwidth)})")
    print("| weights | MB a sweep | ms (median) | GB/s | share of read bandwidth |")
    print("|---|---:|---:|---:|---:|")
    for b, level in runs:
        s = statistics.median(samples[(b, level)])
        print(f"| {label(b, level)} | {nbytes[b] / 1e6:.0f} | {s * 1e3:.2f} | "
              f"{nbytes[b] / s / 1e9:.1f} | {nbytes[b] / s / 1e9 / bw:.2f} |")
    if args.hot:
        print("\nIn cache (layer 0's qkv and o GEMVs, 48 times each a sweep):")
        print("| weights | MB a sweep | ms (median) | GB/s in cache | streaming GB/s / in-cache GB/s |")
        print("|---|---:|---:|---:|---:|")
        for b, level in runs:
            h, s = statistics.median(hot_samples[(b, level)]), statistics.median(samples[(b, level)])
            print(f"| {label(b, level)} | {hot_bytes[b] / 1e6:.0f} | "
                  f"{h * 1e3:.2f} | {hot_bytes[b] / h / 1e9:.1f} | {(nbytes[b] / s) / (hot_bytes[b] / h):.2f} |")

if __name__ == "__main__":
    main()
