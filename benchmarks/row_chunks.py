"""Micro-benchmark behind backends/cpu/kernels/_row_chunks.py: torch's oneDNN bf16 linear (mkldnn._linear_pointwise
on a packed weight, as the artifact runs it) called whole against the same call in 256-row chunks joined by
torch.cat (malloc tuned as a loaded artifact tunes it), at BERT-base, all-MiniLM-L6-v2 and Qwen2-0.5B layer shapes and several row counts. Each pair is checked
against the other first, then timed in interleaved rounds in one process; medians, ms per call, and TFLOP/s.

    python benchmarks/row_chunks.py --rounds 9
"""
from __future__ import annotations

import torch

from direct_linear import timing_arguments
from timing import interleaved_us

from ipexconvert.backends.cpu.kernels._row_chunks import CHUNK, in_chunks
from ipexconvert.backends.cpu.malloc import keep_freed_memory

# (rows, in features, out features, unary post-op)
CASES = [(rows, k, n, post) for rows in (512, 1024, 2048)
         for k, n, post in ((768, 2304, "none"), (768, 768, "none"), (768, 3072, "gelu"), (3072, 768, "none"))]
CASES += [(4096, 384, 1152, "none"), (4096, 384, 384, "none"), (4096, 384, 1536, "gelu"), (4096, 1536, 384, "none"),
          (512, 896, 1152, "none"), (512, 896, 4864, "none"), (512, 4864, 896, "none")]


def main() -> None:
    args = timing_arguments(__doc__, calls=5)
    keep_freed_memory()  # as a loaded artifact does: outputs reuse heap pages instead of faulting fresh ones in
    print(f"| rows x in -> out (post-op) | whole ms | {CHUNK}-row chunks ms | chunks / whole | whole TFLOP/s | chunks TFLOP/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for rows, k, n, post in CASES:
        g = torch.Generator().manual_seed(rows + k + n)
        x = torch.randn(rows, k, generator=g).bfloat16()
        weight, bias = (torch.randn(n, k, generator=g) / k ** 0.5).bfloat16(), torch.randn(n, generator=g).bfloat16()
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
        unary = (post, [], "none") if post != "none" else ("none", [], "")

        def call(a, operand):
            return torch.ops.mkldnn._linear_pointwise(a, packed, bias, *unary)

        whole, chunks = call(x, None), in_chunks(call, x, None, rows)
        diff = ((whole.float() - chunks.float()).abs().max() / whole.float().abs().max()).item()
        assert diff < 1e-2, f"{rows} x {k} -> {n}: chunks differ from the whole call by {diff}"
        us = interleaved_us({"whole": lambda: call(x, None), "chunks": lambda: in_chunks(call, x, None, rows)},
                            rounds=args.rounds, calls=args.calls)
        flop = 2 * rows * k * n
        print(f"| {rows} x {k} -> {n} ({post}) | {us['whole'] / 1e3:.3f} | {us['chunks'] / 1e3:.3f} | "
              f"{us['chunks'] / us['whole']:.2f} | {flop / us['whole'] / 1e6:.2f} | {flop / us['chunks'] / 1e6:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
