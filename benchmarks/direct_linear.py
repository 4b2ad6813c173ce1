"""Micro-benchmark behind the direct oneDNN linear layers (docs/native.md, "Direct oneDNN layers"):
torch's per-call oneDNN operators against ipexconvert._dnnl.Linear (primitive kept per row count),
at BERT-base GEMM shapes, int8 (uint8 x int8 -> bf16) and bf16. Each pair is checked against the
other first, then timed in interleaved rounds in one process; medians, us per call.

    python benchmarks/direct_linear.py --rounds 9
"""
from __future__ import annotations

import argparse

import torch

from ipexconvert.backends.cpu import onednn_direct as dnnl
from timing import interleaved_us  # benchmarks/ is on sys.path as the script's folder

SHAPES = [(128, 768, 2304), (128, 768, 768), (128, 768, 3072), (128, 3072, 768), (1, 768, 768)]


def variants(m: int, k: int, n: int) -> dict:
    g = torch.Generator().manual_seed(0)
    xq = torch.randint(0, 256, (m, k), dtype=torch.uint8, generator=g)
    wq = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    scales, bias = torch.rand(n, generator=g) * 1e-3 + 1e-4, torch.randn(n, generator=g)
    packed = torch.ops.onednn.qlinear_prepack(wq, None)
    zero_points = torch.zeros(n, dtype=torch.int64)
    qlinear = dnnl.raw.Linear(wq, scales, bias, "uint8", "bfloat16", x_scale=0.05, x_zero_point=7)
    x, w = torch.randn(m, k, generator=g).bfloat16(), (torch.randn(n, k, generator=g) / k ** 0.5).bfloat16()
    packed_bf16 = torch.ops.mkldnn._reorder_linear_weight(w, None)
    linear = dnnl.raw.Linear(w, None, bias, "bfloat16", "bfloat16")

    def direct(layer, inp):
        def run():
            out = torch.empty(m, n, dtype=torch.bfloat16)
            layer.run(inp, out)
            return out
        return run

    return {
        "int8 torch": lambda: torch.ops.onednn.qlinear_pointwise(xq, 0.05, 7, packed, scales, zero_points, bias, 1.0,
                                                                  0, torch.bfloat16, "none", [], ""),
        "int8 direct": direct(qlinear, xq),
        "bf16 torch": lambda: torch.ops.mkldnn._linear_pointwise(x, packed_bf16, bias, "none", [], ""),
        "bf16 direct": direct(linear, x),
    }


def timing_arguments(doc: str, calls: int, extra=None) -> argparse.Namespace:
    """--rounds, --calls (per round) and --threads, the latter applied to torch here; `extra(parser)`
    adds a script's own options."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--threads", type=int, default=2)
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args


def main() -> None:
    args = timing_arguments(__doc__, calls=100)
    print("| [rows x in -> out] | int8 torch | int8 direct | ratio | bf16 torch | bf16 direct | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m, k, n in SHAPES:
        fns = variants(m, k, n)
        for kind in ("int8", "bf16"):
            a, b = fns[f"{kind} torch"]().float(), fns[f"{kind} direct"]().float()
            assert ((a - b).abs().max() / a.abs().max()).item() < 2e-2, f"{kind} {m}x{k}x{n} disagree"
        t = interleaved_us(fns, args.rounds, args.calls, warmup=5)
        print(f"| {m} x {k} -> {n} | {t['int8 torch']:.0f} | {t['int8 direct']:.0f} | "
              f"{t['int8 direct'] / t['int8 torch']:.2f} | {t['bf16 torch']:.0f} | {t['bf16 direct']:.0f} | "
              f"{t['bf16 direct'] / t['bf16 torch']:.2f} |")


if __name__ == "__main__":
    main()
