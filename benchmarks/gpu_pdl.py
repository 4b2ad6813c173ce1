"""Programmatic dependent launch (Hopper and later) for a chain of small weight-streaming GEMVs, measured on its
own before any kernel of the backend takes it up: does it cut a decode step's per-kernel latency inside a CUDA
graph, and by how much?

A decode step on the GPU is ~130 small kernels replayed from one graph (TinyLlama int4: 89 GEMVs at 9 us each
where their weights alone would take 1-3 us; docs/gpu.md). Each kernel starts only after its predecessor has
finished and flushed. With programmatic dependent launch (Triton's `launch_pdl=True`, PTX `griddepcontrol`) the
next kernel is launched while its predecessor runs; it can load the first tile of its weights, which no kernel
writes, then waits (`gdc_wait`) before it reads the vector the predecessor wrote. The chain here: `--chain`
kernels y_{i+1} = W_i y_i, each W_i its own bf16 [n, n] matrix (so every kernel streams fresh weights), timed as
CUDA-graph replays (GPU time per kernel), with and without PDL, for each size in `--sizes`; the outputs of both
must agree (same arithmetic, same order). Session 49 on an H200: 0.94x and 0.98x the time a kernel at n 2048 and
5632 (benchmarks/results/session49-gpu-pdl-chain-h200.log); the backend's woq_rows took it up (docs/gpu.md).

    python benchmarks/gpu_pdl.py --sizes 2048,5632 --chain 64
"""
from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

from timing import gpu_graph_ms


@triton.jit
def gemv(w_ptr, x_ptr, y_ptr, K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
         USE_GDC: tl.constexpr):
    """y[rows] = W[rows, :] @ x for this program's BLOCK_N rows (K a multiple of BLOCK_K). With USE_GDC the first
    weight tile is loaded before waiting for the predecessor (it does not write W), x only after."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k = tl.arange(0, BLOCK_K)
    tile = w_ptr + rows.to(tl.int64)[:, None] * K + k[None, :]
    w = tl.load(tile)
    if USE_GDC:
        tl.extra.cuda.gdc_wait()
    acc = tl.sum(w.to(tl.float32) * tl.load(x_ptr + k).to(tl.float32)[None, :], axis=1)
    for start in range(BLOCK_K, K, BLOCK_K):
        w = tl.load(tile + start)
        acc += tl.sum(w.to(tl.float32) * tl.load(x_ptr + start + k).to(tl.float32)[None, :], axis=1)
    if USE_GDC:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty))


def chain(weights: list[torch.Tensor], vectors: list[torch.Tensor], pdl: bool, block_n: int, block_k: int):
    """The calls of one pass down the chain: vectors[i + 1] = weights[i] @ vectors[i]."""
    n = weights[0].shape[0]

    def call(i: int):
        return lambda: gemv[(n // block_n,)](weights[i], vectors[i], vectors[i + 1], K=n, BLOCK_N=block_n,
                                             BLOCK_K=block_k, USE_GDC=pdl, launch_pdl=pdl, num_warps=4)
    return [call(i) for i in range(len(weights))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2048,5632", help="n of the [n, n] bf16 matrices")
    ap.add_argument("--chain", type=int, default=64, help="kernels in one pass")
    ap.add_argument("--block-n", type=int, default=16)
    ap.add_argument("--block-k", type=int, default=256)
    ap.add_argument("--replays", type=int, default=20)
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}; "
          f"{args.chain} GEMV kernels a pass, CUDA-graph replays", flush=True)
    for n in (int(s) for s in args.sizes.split(",")):
        torch.manual_seed(0)
        weights = [torch.randn(n, n, device=gpu, dtype=torch.bfloat16) / n ** 0.5 for _ in range(args.chain)]
        outputs, times = {}, {}
        for pdl in (False, True):
            vectors = [torch.ones(n, device=gpu, dtype=torch.bfloat16)]
            vectors += [torch.empty(n, device=gpu, dtype=torch.bfloat16) for _ in range(args.chain)]
            try:
                times[pdl] = gpu_graph_ms(chain(weights, vectors, pdl, args.block_n, args.block_k), args.replays)
            except Exception as e:  # PDL unsupported here (GPU, driver, Triton) or not capturable
                print(f"n {n}, PDL {pdl}: {type(e).__name__}: {e}", flush=True)
                continue
            torch.cuda.synchronize()
            outputs[pdl] = vectors[-1].float().clone()
        weight_mb = 2 * n * n / 1e6
        for pdl, ms in times.items():
            print(f"n {n} ({weight_mb:.1f} MB a kernel), PDL {'on ' if pdl else 'off'}: {ms * 1000:.2f} us a kernel, "
                  f"{weight_mb / ms:.0f} GB/s", flush=True)
        if len(outputs) == 2:
            same = torch.equal(outputs[False], outputs[True])
            print(f"n {n}: outputs with and without PDL {'identical' if same else 'DIFFER'}; on/off "
                  f"{times[True] / times[False]:.3f}", flush=True)


if __name__ == "__main__":
    main()
