"""An experiment, not yet in the product: the GPU's int8 GEMM (backends/cuda/kernels/_triton_jit.int8_gemm) with
its operand tiles loaded by the Hopper tensor memory accelerator (Triton tensor descriptors) instead of pointer
loads, optionally with Triton's automatic warp specialization of the k loop, and the same epilogue. Session 29
measured the pointer-load kernel at 31-50 % of the H200's int8 tensor-core peak on BERT-base's K = 768 GEMMs
(`results/session29-gpu-int8-sweep-*-h200.log`); this times the TMA variants beside it on the same shapes.
Session 30 ran it on the H200 (Triton 3.6): after the baseline, the first TMA variant gave nothing for 280 s, so
each variant now runs in its own process with a timeout, its first call (the compile) timed apart.
`--compile-only` compiles every variant for sm_90 offline, with any Triton and no GPU.

    python benchmarks/gpu_int8_tma.py --rows 4096,128 --shapes 2304x768,768x768,3072x768,768x3072 --variants 0,1,8 --timeout 60
    python benchmarks/gpu_int8_tma.py --compile-only
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from ipexconvert.backends.cuda.kernels import _triton_int8
from ipexconvert.backends.cuda.kernels._triton_jit import dot_codes, epilogue_tile, grouped_tile  # noqa: F401 (globals the kernel calls)

sys.path.insert(0, str(Path(__file__).resolve().parent))


@triton.jit
def int8_gemm_tma(x_desc, w_desc, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, rows, cols, K,
                  a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale, operand_zero,
                  inv_out_scale, out_zero_point, lo, hi,
                  FLIP: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
                  P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, QUANTIZE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  WARP_SPECIALIZE: tl.constexpr):
    """int8_gemm with x [rows, K] and w [cols, K] read through tensor descriptors (blocks past the ends read as 0,
    which the store drops or, past K, w's zeros cancel)."""
    pid_m, pid_n = grouped_tile(rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for start in tl.range(0, K, BLOCK_K, warp_specialize=WARP_SPECIALIZE):
        x = x_desc.load([pid_m * BLOCK_M, start])
        w = w_desc.load([pid_n * BLOCK_N, start])
        acc = dot_codes(x, w.T, acc, FLIP)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    epilogue_tile(acc, rm.to(tl.int64)[:, None], rn[None, :], rows, cols, offset_ptr, scale_ptr, bias_ptr, a_ptr,
                  b_ptr, out_ptr, a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale,
                  operand_zero, inv_out_scale, out_zero_point, lo, hi, HAS_BIAS, HAS_A, HAS_B, P0, P1, P2, P3,
                  QUANTIZE)


VARIANTS = [(bm, bn, 128, warps, stages, ws) for bm, bn, warps, stages, ws in itertools.product(
    (64, 128), (128, 256), (4, 8), (3, 4), (False, True))]


def run_tma(x, weight, flip, offset, col_scale, bias, codes, operands, shape, out_dtype, quantize, variant):
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages, ws = variant
    rows, k = x.shape
    cols = weight.shape[0]
    out = torch.empty((rows, cols), dtype=out_dtype, device=x.device)
    args, flags = _triton_int8._epilogue_args(offset, col_scale, bias, codes, operands, shape, rows, cols, out,
                                              quantize)
    grid = (triton.cdiv(rows, bm) * triton.cdiv(cols, bn),)
    int8_gemm_tma[grid](TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(weight, [bn, bk]),
                        *args[:8], k, *args[8:], **flags, FLIP=flip, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                        WARP_SPECIALIZE=ws, num_warps=warps, num_stages=stages)
    return out.reshape(tuple(shape))


def compile_only() -> None:
    """Compile every variant for sm_90 (no GPU needed) and say which fail."""
    import inspect

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(inspect.signature(int8_gemm_tma.fn).parameters)
    floats = {"operand_scale", "operand_zero", "inv_out_scale", "out_zero_point", "lo", "hi"}
    for bm, bn, bk, warps, stages, ws in VARIANTS:
        constants = dict(FLIP=True, HAS_BIAS=True, HAS_A=True, HAS_B=False, P0=2, P1=12, P2=0, P3=0, QUANTIZE=True,
                         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, WARP_SPECIALIZE=ws)
        pointers = {"x_desc": f"tensordesc<u8[{bm},{bk}]>", "w_desc": f"tensordesc<i8[{bn},{bk}]>",
                    "offset_ptr": "*i32", "scale_ptr": "*fp32", "bias_ptr": "*fp32", "a_ptr": "*fp32",
                    "b_ptr": "*fp32", "out_ptr": "*u8"}
        signature = {n: "constexpr" if n in constants else pointers.get(n, "fp32" if n in floats else "i32")
                     for n in names}
        try:
            kernel = triton.compile(ASTSource(fn=int8_gemm_tma, signature=signature, constexprs=constants),
                                    target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
            tma = "cp.async.bulk.tensor" in kernel.asm["ptx"]
            print(f"{bm}x{bn}x{bk} warps {warps} stages {stages} ws {ws}: compiled (TMA {tma}, shared "
                  f"{kernel.metadata.shared} bytes)")
        except Exception as e:  # noqa: BLE001 (reported, the sweep goes on)
            print(f"{bm}x{bn}x{bk} warps {warps} stages {stages} ws {ws}: {type(e).__name__}: {str(e)[:200]}")


def time_variant(variant, cases) -> None:
    """One variant over every case (in a child process: session 30's first variant hung under Triton 3.6 for the
    whole call); prints a line per case, the first call (compile) timed apart from the graph replays."""
    import time

    from timing import gpu_graph_ms

    for m, n, k, weights, x_u8, epilogue in cases:
        start = time.perf_counter()
        run_tma(x_u8, weights[0], True, *epilogue, variant)
        torch.cuda.synchronize()
        first = time.perf_counter() - start
        ms = gpu_graph_ms([lambda w=w: run_tma(x_u8, w, True, *epilogue, variant) for w in weights])
        bm, bn, bk, warps, stages, ws = variant
        print(f"rows {m} {n}x{k}: TMA {bm}x{bn}x{bk} warps {warps} stages {stages} warp-specialized {ws}: "
              f"{ms * 1000:.1f} us ({2 * m * n * k / ms / 1e9:.0f} TOP/s; first call {first:.1f} s)", flush=True)


def main() -> None:
    import subprocess

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="4096,128")
    ap.add_argument("--shapes", default="2304x768,768x768,3072x768,768x3072", help="NxK,...")
    ap.add_argument("--variants", default="", help="indices into VARIANTS (default all), e.g. 0,5,9")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per variant (its own process)")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
        return
    from gpu_int8_sweep import gemm_case

    shapes = [(m, *(int(v) for v in shape.split("x")))
              for m, shape in itertools.product((int(r) for r in args.rows.split(",")), args.shapes.split(","))]
    if args.child is not None:
        time_variant(VARIANTS[args.child], [(m, n, k, *gemm_case(m, n, k)) for m, n, k in shapes])
        return
    from timing import gpu_graph_ms

    for m, n, k in shapes:
        weights, x_u8, epilogue = gemm_case(m, n, k)
        base = gpu_graph_ms([lambda w=w: _triton_int8.run_int8_gemm(x_u8, w, True, *epilogue) for w in weights])
        print(f"rows {m} {n}x{k}: int8_gemm (pointer loads, default tile) {base * 1000:.1f} us "
              f"({2 * m * n * k / base / 1e9:.0f} TOP/s)", flush=True)
    indices = [int(i) for i in args.variants.split(",")] if args.variants else range(len(VARIANTS))
    forwarded = ["--rows", args.rows, "--shapes", args.shapes]
    for i in indices:
        try:
            out = subprocess.run([sys.executable, __file__, *forwarded, "--child", str(i)], capture_output=True,
                                 text=True, timeout=args.timeout)
            lines = out.stdout.strip() or f"variant {i} {VARIANTS[i]}: failed: {out.stderr.strip()[-300:]}"
        except subprocess.TimeoutExpired as e:
            done = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            lines = f"{done}variant {i} {VARIANTS[i]}: no result within {args.timeout:.0f} s"
        print(lines, flush=True)


if __name__ == "__main__":
    main()
