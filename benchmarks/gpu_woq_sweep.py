"""Times the GPU's weight-only GEMV kernel (backends/cuda/kernels/woq_linear.py, one decode row) on a decoder's
layer shapes for several tile choices, beside torch's bf16 GEMV of the same shape; prints GB/s of codes + scales.
Each figure is GPU time: the calls are captured in a CUDA graph and replayed (session 26's first version timed
Python-launched calls, which measured the launches).

    python benchmarks/gpu_woq_sweep.py --shapes 2560x2048,2048x2048,11264x2048,2048x5632,32000x2048
"""
from __future__ import annotations

import argparse
import itertools

import torch

from ipexconvert.backends.cuda.kernels import woq_linear
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext


def time_ms(fn, calls: int = 20, replays: int = 10) -> float:
    """GPU milliseconds a call: `calls` calls captured in one CUDA graph, replayed (so the launches' CPU cost, which
    dwarfs a small GEMV's, is not counted), the median of `replays`."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # warm-up (Triton compiles, cuBLAS workspaces) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="2560x2048,2048x2048,11264x2048,2048x5632,32000x2048", help="NxK,...")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    op = get_op("woq_linear")
    dtype = getattr(torch, args.dtype)
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        codes = (torch.randint(0, 256, (n, k // 2), dtype=torch.uint8) if args.bits == 4
                 else torch.randint(-127, 128, (n, k), dtype=torch.int8)).to(gpu)
        scales = (torch.rand(n, k // args.group) * 0.05).to(gpu)
        x = torch.randn(1, 1, k, dtype=dtype, device=gpu)
        size = codes.numel() * codes.element_size() + scales.numel() * 4
        weight = torch.randn(n, k, dtype=torch.bfloat16, device=gpu)
        bf16 = time_ms(lambda: torch.nn.functional.linear(x.bfloat16(), weight))
        print(f"{n}x{k}: torch bf16 GEMV {bf16 * 1000:.1f} us ({n * k * 2 / bf16 / 1e6:.0f} GB/s)", flush=True)
        attrs = op.parse_attrs({"bits": args.bits, "group_size": args.group})
        inputs = [x, codes, scales, None, None]
        specs = tuple(None if t is None else TensorSpec.of(t) for t in inputs)
        results = []
        for block_n, chunk, warps in itertools.product((4, 8, 16, 32), (256, 512, 1024), (1, 2, 4)):
            woq_linear.BLOCK_N, woq_linear.CHUNK, woq_linear.NUM_WARPS = block_n, chunk, warps
            ctx = NodeContext(op="woq_linear", attrs=attrs, constants=(None, codes, scales, None, None),
                              input_specs=specs, output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm")
            kernel = woq_linear.triton_woq_linear(ctx)
            ms = time_ms(lambda: kernel.fn([x, None, None, None, None], {}))
            results.append((ms, block_n, chunk, warps))
        for ms, block_n, chunk, warps in sorted(results)[:5]:
            print(f"   block_n {block_n:2d} chunk {chunk:4d} warps {warps}: {ms * 1000:.1f} us "
                  f"({size / ms / 1e6:.0f} GB/s)", flush=True)


if __name__ == "__main__":
    main()
