"""Micro-benchmark of the decode attention kernel (native/kernels/decode_attention): one query row of every head
against a KV cache viewed inside a buffer with spare positions, as a decode step calls it, for a model's layers
in a row with the caches evicted first (the weight stream of a real step evicts them too). Checked against
torch's attention first; medians of rounds, us per layer. Caches: float32 or bf16 beside q of its dtype, and beside
float32 q a bf16 cache (`--kv-cache bf16`) or int8 rows (`--kv-cache int8`, ir/ops/_kv_int8.py).

    python benchmarks/decode_attention.py [--threads 2] [--rounds 30] [--evict-mb 512] [--caches f32,f32q-int8]
        [--shapes qwen2-0.5b@530,...]
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

from ipexconvert.backends.cpu import native_lib
from ipexconvert.ir.ops._kv_int8 import dequantize_rows, quantize_rows

EVICT_MB = 512  # written between rounds: more than the last-level cache (260 MiB on the AVX-512 VNNI Xeon of session 36)
# name: (query heads, kv heads, head_dim, cached positions)
SHAPES = {
    "qwen2-0.5b@530": (14, 2, 64, 530),
    "qwen2-0.5b@2048": (14, 2, 64, 2048),
    "qwen2-0.5b@4000": (14, 2, 64, 4000),
    "llama-7b-gqa@1024": (32, 4, 128, 1024),
    "mqa@530": (8, 1, 64, 530),
}
# name: (q dtype, how the cache is stored: a dtype, or "int8" rows)
CACHES = {"f32": (torch.float32, torch.float32), "bf16": (torch.bfloat16, torch.bfloat16),
          "f32q-bf16": (torch.float32, torch.bfloat16), "f32q-int8": (torch.float32, "int8")}


def _cache(x: torch.Tensor, stored) -> torch.Tensor:
    return quantize_rows(x) if stored == "int8" else x.to(stored)


def _values(cache: torch.Tensor) -> torch.Tensor:
    return dequantize_rows(cache) if cache.dtype == torch.int8 else cache.float()


def time_layers(heads, kv_heads, head_dim, length, dtype, threads, rounds, layers=24,
                evict_mb=EVICT_MB, stored=None) -> tuple[float, float, float]:
    """(median us per layer, max abs error against torch's attention, cache MB read per layer); the cache stored as
    `stored` (a dtype or "int8" rows; default q's dtype)."""
    g = torch.Generator().manual_seed(0)
    stored = dtype if stored is None else stored
    queries = [torch.randn(1, heads, 1, head_dim, generator=g).to(dtype) for _ in range(layers)]
    buffers = [tuple(_cache(torch.randn(1, kv_heads, length + 256, head_dim, generator=g), stored) for _ in range(2))
               for _ in range(layers)]
    mask = torch.zeros(1, 1, 1, length, dtype=dtype)
    outs = [torch.empty(1, 1, heads, head_dim, dtype=dtype).permute(0, 2, 1, 3) for _ in range(layers)]
    evict = torch.empty(evict_mb << 20, dtype=torch.uint8)
    scale = 1 / math.sqrt(head_dim)

    def step():
        for q, (k, v), out in zip(queries, buffers, outs):
            native_lib.raw.decode_attention(q, k[:, :, :length], v[:, :, :length], out, mask, scale, None, threads)

    step()
    k, v = buffers[0][0][:, :, :length], buffers[0][1][:, :, :length]
    want = F.scaled_dot_product_attention(queries[0].float(), _values(k), _values(v), attn_mask=mask.float(),
                                          scale=scale, enable_gqa=True)
    error = (outs[0].float() - want).abs().max().item()
    samples = []
    for _ in range(rounds):
        evict.add_(1)
        start = time.perf_counter()
        step()
        samples.append((time.perf_counter() - start) / layers)
    return 1e6 * statistics.median(samples), error, 2 * k.numel() * k.element_size() / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--evict-mb", type=int, default=EVICT_MB, help="MB written between rounds to evict the caches")
    ap.add_argument("--caches", default=",".join(CACHES), help=f"comma-separated, of {', '.join(CACHES)}")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("| shape | q / cache | us per layer | cache MB read per layer | GB/s | max abs error vs torch |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.shapes.split(","):
        heads, kv_heads, head_dim, length = SHAPES[name]
        for cache in args.caches.split(","):
            dtype, stored = CACHES[cache]
            us, error, mb = time_layers(heads, kv_heads, head_dim, length, dtype, args.threads, args.rounds,
                                        evict_mb=args.evict_mb, stored=stored)
            print(f"| {name} | {cache} | {us:.1f} | {mb:.2f} | {mb / us * 1e3:.1f} | {error:.1e} |")


if __name__ == "__main__":
    main()
