"""The fixed cost of one direct oneDNN layer call (docs/native.md, "Direct oneDNN layers"): `Conv.run`
on a trivial int8 1x1 convolution ([1, 16, 2, 2]), where the arithmetic is negligible and what is
left is the binding, the plan lookup, the arguments and oneDNN's own dispatch. Medians of rounds
of 2000 calls, us per call. Run it with two builds (e.g. a clean clone of the previous commit and
this one) to compare.

    python benchmarks/dnnl_call_cost.py --rounds 7
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ipexconvert.backends.cpu import onednn_direct as dnnl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    weight = torch.randint(-100, 100, (16, 16, 1, 1), dtype=torch.int8)
    conv = dnnl.raw.Conv(weight, torch.rand(16) * 0.01 + 0.001, torch.randn(16), (1, 1), (0, 0), (1, 1), "uint8",
                         "uint8", relu=True, sum=False, sum_scale=1.0, sum_zero_point=0, x_scale=0.05, x_zero_point=0,
                         y_scale=0.05, y_zero_point=0)
    x = torch.randint(0, 255, (1, 16, 2, 2), dtype=torch.uint8).contiguous(memory_format=torch.channels_last)
    out = torch.empty(1, 16, 2, 2, dtype=torch.uint8).contiguous(memory_format=torch.channels_last)
    for _ in range(200):
        conv.run(x, out)
    samples = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(2000):
            conv.run(x, out)
        samples.append((time.perf_counter() - start) / 2000 * 1e6)
    print(f"Conv.run, trivial int8 1x1 layer: {statistics.median(samples):.2f} us per call "
          f"({args.rounds} rounds of 2000, {args.threads} threads)")


if __name__ == "__main__":
    main()
