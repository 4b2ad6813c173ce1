"""The GPU issue's open question "int8 on our Triton GEMM, or FP8 `torch._scaled_mm` on Hopper: measure which":
GPU time of one qlinear-shaped GEMM with a bf16 output and a bias, per encoder shape, for
- torch's bf16 linear (the float baseline),
- our int8 GEMM with its fused epilogue (`_triton_int8.run_int8_gemm`, the tile the product picks),
- `torch._scaled_mm` on float8_e4m3fn operands, per-tensor scales and per-row x per-column scales (cuBLASLt's
  FP8 kernels; bias fused by cuBLASLt).
Calls are captured in a CUDA graph and replayed over weight copies larger than the L2 cache, as a model's layers
are read (`timing.gpu_graph_ms`). Only the GEMM is timed: an FP8 path would also need its activations in fp8
(another epilogue's output), as the int8 path needs its codes.

    python benchmarks/gpu_fp8_gemm.py --rows 4096,128 --shapes 2304x768,768x768,3072x768,768x3072
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

from ipexconvert.backends.cuda.kernels import _triton_int8

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_int8_sweep import gemm_case  # noqa: E402
from timing import gpu_graph_ms  # noqa: E402


def fp8_cases(m: int, n: int, k: int, copies: int):
    """fp8 activations [m, k], weight copies [n, k] (column-major once transposed, as _scaled_mm wants), scales."""
    gpu = torch.device("cuda", 0)
    x = torch.randn(m, k, device=gpu).clamp(-4, 4).to(torch.float8_e4m3fn)
    weights = [torch.randn(n, k, device=gpu).clamp(-4, 4).to(torch.float8_e4m3fn) for _ in range(copies)]
    tensor_scale = torch.tensor(1e-2, device=gpu)
    row_scale = torch.full((m, 1), 1e-2, device=gpu)
    col_scale = torch.full((1, n), 1e-2, device=gpu)
    bias = torch.randn(n, dtype=torch.bfloat16, device=gpu)
    return x, weights, (tensor_scale, tensor_scale), (row_scale, col_scale), bias


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="4096,128")
    ap.add_argument("--shapes", default="2304x768,768x768,3072x768,768x3072", help="NxK,...")
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    print(f"{torch.cuda.get_device_name(gpu)}, torch {torch.__version__}", flush=True)
    for m, shape in itertools.product((int(r) for r in args.rows.split(",")), args.shapes.split(",")):
        n, k = (int(v) for v in shape.split("x"))
        ops = 2 * m * n * k

        def rate(ms: float) -> str:
            return f"{ms * 1000:.1f} us ({ops / ms / 1e9:.0f} T/s)"

        weights, x_u8, epilogue = gemm_case(m, n, k, "bias")
        int8 = gpu_graph_ms([lambda w=w: _triton_int8.run_int8_gemm(x_u8, w, True, *epilogue,
                                                                     tile=_triton_int8.gemm_tile(m))
                             for w in weights])
        copies = len(weights)
        del weights
        wb = [torch.randn(n, k, dtype=torch.bfloat16, device=gpu) for _ in range(max(2, copies // 2))]
        xb = torch.randn(m, k, dtype=torch.bfloat16, device=gpu)
        bb = torch.randn(n, dtype=torch.bfloat16, device=gpu)
        bf16 = gpu_graph_ms([lambda w=w: torch.nn.functional.linear(xb, w, bb) for w in wb])
        del wb
        x8, w8, tensor_scales, row_scales, bias = fp8_cases(m, n, k, copies)
        line = f"rows {m} {n}x{k}: bf16 linear {rate(bf16)}; int8_gemm {rate(int8)}"
        for name, (sa, sb) in (("fp8 per-tensor", tensor_scales), ("fp8 row x col", row_scales)):
            try:
                ms = gpu_graph_ms([lambda w=w: torch._scaled_mm(x8, w.t(), scale_a=sa, scale_b=sb, bias=bias,
                                                                out_dtype=torch.bfloat16) for w in w8])
                line += f"; {name} {rate(ms)}"
            except Exception as e:  # a torch build or GPU without these kernels
                line += f"; {name}: {type(e).__name__}: {str(e)[:120]}"
        print(line, flush=True)
        del w8


if __name__ == "__main__":
    main()
