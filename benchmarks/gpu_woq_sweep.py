"""Times the GPU's weight-only GEMV kernel (backends/cuda/kernels/woq_linear.py, one decode row) on a decoder's
layer shapes for several tile choices, beside torch's bf16 GEMV of the same shape; prints GB/s of codes + scales.
Each figure is GPU time: the calls are captured in a CUDA graph and replayed (session 26's first version timed
Python-launched calls, which measured the launches).

    python benchmarks/gpu_woq_sweep.py --shapes 2560x2048,2048x2048,11264x2048,2048x5632,32000x2048
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

from ipexconvert.backends.cuda.kernels import woq_linear
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import gpu_graph_ms  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="2560x2048,2048x2048,11264x2048,2048x5632,32000x2048", help="NxK,...")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--activations", default="float", choices=("float", "int8"))
    ap.add_argument("--rows", type=int, default=1, help="rows of x (decode: 1)")
    ap.add_argument("--block-n", default="16,32,64,128", help="tile columns to try")
    ap.add_argument("--chunk", default="128,512", help="k chunks to try")
    ap.add_argument("--warps", default="2,4", help="warps to try")
    ap.add_argument("--programs", default="512,2048", help="programs a call to aim at")
    ap.add_argument("--profile-once", action="store_true",
                    help="no timing: call the default tile once per shape after a warm-up (for ncu)")
    args = ap.parse_args()
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    gpu = torch.device("cuda", 0)
    op = get_op("woq_linear")
    dtype = getattr(torch, args.dtype)
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        codes = (torch.randint(0, 256, (n, k // 2), dtype=torch.uint8) if args.bits == 4
                 else torch.randint(-127, 128, (n, k), dtype=torch.int8)).to(gpu)
        scales = (torch.rand(n, k // args.group) * 0.05).to(gpu)
        x = torch.randn(1, args.rows, k, dtype=dtype, device=gpu)
        size = codes.numel() * codes.element_size() + scales.numel() * 4
        attrs = op.parse_attrs({"bits": args.bits, "group_size": args.group, "activations": args.activations})
        specs = tuple(None if t is None else TensorSpec.of(t) for t in [x, codes, scales, None, None])

        def kernel_for(c: torch.Tensor):  # the GPU factory's kernel at the current woq_linear.TILES
            return woq_linear.triton_woq_linear(NodeContext(
                op="woq_linear", attrs=attrs, constants=(None, c, scales, None, None), input_specs=specs,
                output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm"))

        if args.profile_once:
            kernel = kernel_for(codes)
            for _ in range(3):
                kernel.fn([x, None, None, None, None], {})
            torch.cuda.synchronize()
            print(f"{n}x{k}: profiled call done ({size / 1e6:.1f} MB)", flush=True)
            continue
        weights = [torch.randn(n, k, dtype=torch.bfloat16, device=gpu)
                   for _ in range(max(4, -(-(400 << 20) // (n * k * 2))))]
        xb = x.bfloat16()
        bf16 = gpu_graph_ms([lambda w=w: torch.nn.functional.linear(xb, w) for w in weights])
        del weights
        print(f"{n}x{k}: torch bf16 GEMV {bf16 * 1000:.1f} us ({n * k * 2 / bf16 / 1e6:.0f} GB/s)", flush=True)
        copies = max(8, -(-(400 << 20) // size))  # 400 MB of codes: nothing is read from L2
        codes_list = [codes.clone() for _ in range(copies)]
        results = []
        kind = args.activations
        default = woq_linear.TILES[kind]
        grid = itertools.product(ints(args.block_n), ints(args.chunk), ints(args.warps), ints(args.programs))
        for block_n, chunk, warps, programs in grid:
            tile = woq_linear.Tile(block_n=block_n, chunk=chunk, warps=warps, programs=programs)
            woq_linear.TILES[kind] = tile
            kernels = [kernel_for(c) for c in codes_list]
            ms = gpu_graph_ms([lambda kernel=kernel: kernel.fn([x, None, None, None, None], {}) for kernel in kernels])
            results.append((ms, block_n, chunk, warps, programs))
        woq_linear.TILES[kind] = default
        for ms, block_n, chunk, warps, programs in sorted(results)[:8]:
            print(f"   block_n {block_n:2d} chunk {chunk:4d} warps {warps} programs {programs:4d}: {ms * 1000:.1f} us "
                  f"({size / ms / 1e6:.0f} GB/s)", flush=True)
        chosen = [r for r in results if r[1:] == (default.block_n, default.chunk, default.warps, default.programs)]
        if chosen:
            print(f"   the default tile: {chosen[0][0] * 1000:.1f} us", flush=True)


if __name__ == "__main__":
    main()
