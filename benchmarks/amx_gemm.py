"""Micro-benchmark behind the bf16_amx_gemm kernel (native/kernels/bf16_amx_gemm/): a whole BERT-base encoder's
bf16 linear layers (12 layers x QKV 768 -> 2304, output 768 -> 768, FC1 768 -> 3072 with GELU, FC2 3072 -> 768;
170 MB of weights, more than the L3 holds, so each call streams its weight from memory as in the model) through
torch's oneDNN linear (mkldnn._linear_pointwise on its packed weight, as the artifact ran every bf16 linear) and
through bf16_amx_gemm on its packed weight, at several row counts (128: one 128-token sentence). Each layer's two
results are checked against each other first; then interleaved rounds of one pass over the 48 layers each, medians.

    python benchmarks/amx_gemm.py --rounds 9
"""
from __future__ import annotations

import torch

from direct_linear import timing_arguments
from timing import layer_pass_row

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.kernels.linear import pack_amx_weight
from ipexconvert.backends.cpu.malloc import keep_freed_memory

SHAPES = [(768, 2304, "none"), (768, 768, "none"), (768, 3072, "gelu"), (3072, 768, "none")]  # in, out, post-op
LAYERS = 12


def main() -> None:
    args = timing_arguments(__doc__, calls=1, extra=lambda p: p.add_argument(
        "--rows", type=int, nargs="+", default=[16, 32, 64, 128, 192, 256, 384, 512]))
    if native_lib.raw.kernel_level("bf16_amx_gemm") != "amx":
        raise SystemExit("bf16_amx_gemm needs a CPU with AMX (and a build with its amx level)")
    keep_freed_memory()
    g = torch.Generator().manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        for k, n, post in SHAPES:
            weight = (torch.randn(n, k, generator=g) / k ** 0.5).bfloat16()
            bias = torch.randn(n, generator=g).bfloat16()
            layers.append((k, n, post, torch.ops.mkldnn._reorder_linear_weight(weight, None), bias,
                           pack_amx_weight(weight), bias.float()))
    threads = torch.get_num_threads()
    weight_mb = sum(k * n * 2 for k, n, *_ in layers) / 1e6
    print(f"{len(layers)} layers, {weight_mb:.0f} MB of bf16 weights, {threads} threads\n")
    print("| rows | oneDNN ms | bf16_amx_gemm ms | ours / oneDNN | oneDNN TFLOP/s | ours TFLOP/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for rows in args.rows:
        xs = {k: torch.randn(rows, k, generator=g).bfloat16() for k in (768, 3072)}
        outs = {n: torch.empty(rows, n, dtype=torch.bfloat16) for n in (768, 2304, 3072)}

        def onednn_layer(k, n, post, packed, bias, *_):
            unary = (post, [], "none") if post != "none" else ("none", [], "")
            return torch.ops.mkldnn._linear_pointwise(xs[k], packed, bias, *unary)

        def amx_layer(k, n, post, _packed, _bias, amx_weight, amx_bias):
            native_lib.raw.bf16_amx_gemm(xs[k], amx_weight, amx_bias, outs[n], None, threads, post)
            return outs[n]

        for layer in layers[:len(SHAPES)]:
            a, b = onednn_layer(*layer).float(), amx_layer(*layer).float()
            diff = ((a - b).abs().max() / a.abs().max()).item()
            assert diff < 2e-2, f"{rows} rows, {layer[:3]}: bf16_amx_gemm differs from oneDNN by {diff}"
        print(layer_pass_row(rows, layers, onednn_layer, amx_layer, args.rounds, args.calls), flush=True)


if __name__ == "__main__":
    main()
