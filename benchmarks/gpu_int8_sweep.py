"""Times the GPU's int8 GEMM with its fused epilogue (backends/cuda/kernels/_triton_int8.run_int8_gemm) on an
encoder's qlinear shapes for several tile choices, each with pointer loads and with TMA loads (Hopper), beside
the path it replaces (torch._int_mm, then the Triton epilogue) and torch's bf16 linear of the same shape. GPU
time: the calls are captured in a CUDA graph and replayed, over weight copies larger than the L2 cache (as a
model's layers are).

    python benchmarks/gpu_int8_sweep.py --rows 4096,128 --shapes 2304x768,768x768,3072x768,768x3072
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

from ipexconvert.backends.cuda.kernels import _triton_int8
from ipexconvert.backends.cuda.kernels._triton_int8 import GemmTile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import gpu_graph_ms  # noqa: E402


def gemm_case(m: int, n: int, k: int, epilogue_kind: str = "bias"):
    """A qlinear of m rows, n x k: (int8 weight copies over 200 MB, so the replays read them from memory as a
    model's layers are, uint8 codes x, run_int8_gemm's epilogue arguments)."""
    gpu = torch.device("cuda", 0)
    copies = max(2, -(-(200 << 20) // (n * k)))
    weights = [torch.randint(-127, 128, (n, k), dtype=torch.int8, device=gpu) for _ in range(copies)]
    x_u8 = torch.randint(0, 256, (m, k), dtype=torch.uint8, device=gpu)
    offset = torch.zeros(n, dtype=torch.int32, device=gpu)
    col_scale = torch.full((n,), 1e-4, device=gpu)
    bias = torch.randn(n, device=gpu)
    if epilogue_kind == "bias":
        epilogue = (offset, col_scale, bias, [0, 0, 0, 0], [], (m, n), torch.bfloat16, None)
    else:
        epilogue = (offset, col_scale, bias, [2, 0, 0, 0], [], (m, n), torch.uint8, (0.05, 3, "uint8"))
    return weights, x_u8, epilogue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="4096,128")
    ap.add_argument("--shapes", default="2304x768,768x768,3072x768,768x3072", help="NxK,...")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--epilogue", default="bias", choices=("bias", "gelu-requantize"),
                    help="bias: bf16 output; gelu-requantize: GELU, then uint8 codes (an FFN's first layer)")
    ap.add_argument("--tiles", default="all", choices=("all", "default"))
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    tiles = [GemmTile(bm, bn, bk, 8, warps, stages, tma) for bm, bn, bk, warps, stages, tma in itertools.product(
        (64, 128), (64, 128, 256), (64, 128), (4, 8), (3, 4), (False, True))]
    for m, shape in itertools.product((int(r) for r in args.rows.split(",")), args.shapes.split(",")):
        n, k = (int(v) for v in shape.split("x"))
        ops = 2 * m * n * k
        weights, x_u8, epilogue = gemm_case(m, n, k, args.epilogue)
        x_i8 = torch.bitwise_xor(x_u8, 128).view(torch.int8)

        def int_mm(w):
            acc = torch._int_mm(torch.bitwise_xor(x_u8, 128).view(torch.int8), w.t())
            return _triton_int8.run_epilogue(acc, *epilogue)

        wb = [torch.randn(n, k, dtype=torch.bfloat16, device=gpu) for _ in range(max(2, len(weights) // 2))]
        xb = torch.randn(m, k, dtype=torch.bfloat16, device=gpu)
        bf16 = gpu_graph_ms([lambda w=w: torch.nn.functional.linear(xb, w) for w in wb])
        del wb
        base = gpu_graph_ms([lambda w=w: int_mm(w) for w in weights])
        print(f"rows {m} {n}x{k}: torch bf16 linear {bf16 * 1000:.1f} us ({ops / bf16 / 1e9:.0f} TFLOP/s); "
              f"_int_mm + epilogue {base * 1000:.1f} us ({ops / base / 1e9:.0f} TOP/s)", flush=True)
        results = []
        for tile in tiles if args.tiles == "all" else [_triton_int8.gemm_tile(m)]:
            try:
                ms = gpu_graph_ms([lambda w=w: _triton_int8.run_int8_gemm(x_u8, w, True, *epilogue, tile=tile)
                              for w in weights])
            except Exception as e:  # a tile beyond the shared memory or registers
                print(f"   {tile}: {type(e).__name__}", flush=True)
                continue
            results.append((ms, tile))
        default = _triton_int8.gemm_tile(m)
        for ms, tile in sorted(results, key=lambda r: r[0])[:args.top]:
            # the same tile on int8 codes (no flip of the loaded tile): what the flip costs
            unflipped = gpu_graph_ms([lambda w=w: _triton_int8.run_int8_gemm(x_i8, w, False, *epilogue, tile=tile)
                                 for w in weights])
            print(f"   {tile.block_m}x{tile.block_n}x{tile.block_k} warps {tile.warps} stages {tile.stages}"
                  f"{' TMA' if tile.tma else ''}: "
                  f"{ms * 1000:.1f} us ({ops / ms / 1e9:.0f} TOP/s; int8 codes {unflipped * 1000:.1f} us)"
                  f"{'  (default)' if tile == default else ''}", flush=True)
        chosen = [ms for ms, tile in results if tile == default]
        if chosen:
            print(f"   the default tile: {chosen[0] * 1000:.1f} us", flush=True)

if __name__ == "__main__":
    main()
