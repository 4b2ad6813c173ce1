"""woq_gemm's integer paths (a decoder's int8-a8 / int4-a8 linear layers: path 4, int8 weights per channel, or
path 5, 4-bit weights in groups of 128, times int8-quantized rows) at two ISA levels side by side on a 512-token
prompt's Qwen2-0.5B shapes: interleaved rounds, medians, GMAC/s. Both levels must give the same bits (exact integer
sums; checked before timing). On an AMX host the default compares the amx builds' tile prefill with the
avx512_vnni builds' vpdpbusd one:

    taskset -c 0,1 python benchmarks/woq_a8_levels.py [--bits 8|4] [--levels avx512_vnni,amx] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics

import torch

from ipexconvert.backends.cpu.kernels.woq_linear import pack_woq_weight
from ipexconvert.backends.cpu.native_lib import _lib
from timing import interleaved_samples  # benchmarks/ is on sys.path as the script's folder

SHAPES = [(512, 1152, 896), (512, 896, 896), (512, 9728, 896), (512, 896, 4864)]  # m, n, k: qkv, o, gate/up, down


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="avx512_vnni,amx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bits", type=int, choices=(8, 4), default=8)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lib, levels = _lib(), args.levels.split(",")
    bits, path = args.bits, 4 if args.bits == 8 else 5
    print(f"{args.threads} threads, torch {torch.__version__}, " +
          ("per-channel int8 weights\n" if bits == 8 else "4-bit weights, groups of 128\n"))
    print("| m x n x k | " + " | ".join(f"{lv} ms (GMAC/s)" for lv in levels) + " |")
    print("|---|" + "---:|" * len(levels))
    for m, n, k in SHAPES:
        g = torch.Generator().manual_seed(m + n + k)
        x = torch.randn(m, k, generator=g)
        group = k if bits == 8 else 128
        codes = (torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8) if bits == 8 else
                 torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.uint8))
        scales, bias = torch.rand(n, k // group, generator=g) * 0.01 + 0.001, torch.randn(n, generator=g)
        packed, qparams, has_zero = pack_woq_weight(codes, scales, None, bits, group, integer_layout=True)
        outs = {lv: torch.empty(m, n) for lv in levels}
        calls = {lv: (lambda lv=lv: lib.woq_gemm(x, packed, n, bits, group, qparams, has_zero, bias, outs[lv], lv,
                                                 args.threads, path)) for lv in levels}
        for call in calls.values():
            call()
        if not all(torch.equal(outs[lv], outs[levels[0]]) for lv in levels):
            raise SystemExit(f"{m} x {n} x {k}: the levels disagree")
        samples = interleaved_samples(calls, 9, 3)
        cells = [f"{statistics.median(samples[lv]) * 1e3:.2f} ({m * n * k / statistics.median(samples[lv]) / 1e9:.0f})"
                 for lv in levels]
        print(f"| {m} x {n} x {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
