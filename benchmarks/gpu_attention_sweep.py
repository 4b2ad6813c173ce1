"""A decode step's attention on the GPU (backends/cuda/kernels/sdpa.py's Triton kernel) over a sweep of its launch
constants: keys a step (BLOCK_S), programs aimed at (PROGRAMS), most splits of the keys (MAX_SPLITS), warps and
pipeline stages. TinyLlama-1.1B's shapes by default (32 query heads, 4 key/value heads of 64, batch 1, one query
row), a bf16 cache and int8 rows (--kv-cache int8), an additive padding mask as a decoder passes it. Each
configuration: 20 calls captured in one CUDA graph, the graph replayed 20 times, the median per call of 5 such
measurements (so launch gaps count as in a decode step's graph).

    python benchmarks/gpu_attention_sweep.py [--keys 544,1920] [--heads 32 --kv-heads 4 --head-dim 64] [--defaults-only]
"""
from __future__ import annotations

import argparse
import itertools
import statistics

import torch

from ipexconvert.backends.cuda.kernels import sdpa
from ipexconvert.ir import TensorSpec, get_op
from ipexconvert.ir.ops._kv_int8 import quantize_rows
from ipexconvert.runtime.kernels import NodeContext


def kernel_for(q, k, v, mask):
    op = get_op("sdpa")
    attrs = op.parse_attrs({"enable_gqa": True})
    specs = tuple(TensorSpec.of(t) for t in (q, k, v, mask))
    ctx = NodeContext(op="sdpa", attrs=attrs, constants=(None,) * 4, input_specs=specs,
                      output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="gpu")
    return sdpa.triton_sdpa(ctx)


def per_call_us(kernel, inputs) -> float:
    run = lambda: kernel.fn(inputs, {})  # noqa: E731
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            run()
    samples = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / 400)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="544,1920")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--defaults-only", action="store_true", help="time sdpa.py's own constants only")
    args = ap.parse_args()
    gpu = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    default = (sdpa.BLOCK_S, sdpa.PROGRAMS, sdpa.MAX_SPLITS, sdpa.WARPS, sdpa.STAGES)
    print(f"{torch.cuda.get_device_name()}; defaults BLOCK_S, PROGRAMS, MAX_SPLITS, WARPS, STAGES = {default}")
    for keys in (int(n) for n in args.keys.split(",")):
        q = torch.randn(1, args.heads, 1, args.head_dim, generator=g).to(gpu, torch.bfloat16)
        float_kv = [torch.randn(1, args.kv_heads, keys, args.head_dim, generator=g) for _ in range(2)]
        mask = torch.zeros(1, 1, 1, keys).to(gpu, torch.bfloat16)
        caches = {"bf16": [t.to(gpu, torch.bfloat16) for t in float_kv],
                  "int8 rows": [quantize_rows(t).to(gpu) for t in float_kv]}
        for cache, (k, v) in caches.items():
            inputs = [q, k, v, mask]
            want = kernel_for(*inputs).fn(inputs, {}).float()
            results = []
            sweep = itertools.product((32, 64, 128), (32, 64, 128), (1, 8, 32), (2, 4), (3,))
            for config in [default] if args.defaults_only else sweep:
                sdpa.BLOCK_S, sdpa.PROGRAMS, sdpa.MAX_SPLITS, sdpa.WARPS, sdpa.STAGES = config
                kernel = kernel_for(*inputs)
                got = kernel.fn(inputs, {}).float()
                assert torch.allclose(got, want, atol=2e-2, rtol=2e-2), (config, (got - want).abs().max())
                results.append((per_call_us(kernel, inputs), config))
            sdpa.BLOCK_S, sdpa.PROGRAMS, sdpa.MAX_SPLITS, sdpa.WARPS, sdpa.STAGES = default
            base = next(t for t, c in results if c == default)
            results.sort()
            print(f"\n{keys} keys, {cache} cache: defaults {base:.2f} us; fastest:")
            for t, c in results[:6]:
                print(f"  {t:6.2f} us  BLOCK_S {c[0]:3d} PROGRAMS {c[1]:3d} MAX_SPLITS {c[2]:2d} WARPS {c[3]} "
                      f"STAGES {c[4]}")


if __name__ == "__main__":
    main()
