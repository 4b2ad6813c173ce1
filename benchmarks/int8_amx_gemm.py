"""Micro-benchmark behind the int8_amx_gemm kernel (native/kernels/int8_gemm/int8_amx_gemm.cpp): a whole BERT-base
encoder's int8 linear layers (12 layers x QKV 768 -> 2304, output 768 -> 768, FC1 768 -> 3072 with GELU and uint8
codes out, FC2 3072 -> 768; 85 MB of int8 weights) through our oneDNN 3.2 int8 matmul (onednn_direct, as an int8
artifact runs them on AMX: the input zero point folded into the bias) and through int8_amx_gemm, at several row
counts. Each layer's two results are checked against each other first (fp32 within 1e-4 relative, codes within 1);
then interleaved rounds of one pass over the 48 layers each, medians.

    python benchmarks/int8_amx_gemm.py --rounds 9
"""
from __future__ import annotations

import torch

from direct_linear import timing_arguments
from timing import layer_pass_row

from ipexconvert.backends.cpu import native_lib, onednn_direct
from ipexconvert.backends.cpu.kernels._int8_gemm import pack_int8_amx_weight
from ipexconvert.backends.cpu.kernels.qlinear import fold_input_zero_point
from ipexconvert.backends.cpu.malloc import keep_freed_memory

SHAPES = [(768, 2304, "", torch.bfloat16), (768, 768, "", torch.bfloat16), (768, 3072, "gelu", torch.uint8),
          (3072, 768, "", torch.bfloat16)]  # in, out, unary, output
LAYERS = 12
X_SCALE, X_ZERO_POINT, Y_SCALE, Y_ZERO_POINT = 0.05, 61, 0.04, 12


def main() -> None:
    args = timing_arguments(__doc__, calls=1, extra=lambda p: p.add_argument(
        "--rows", type=int, nargs="+", default=[16, 64, 128, 256, 512, 1024]))
    if native_lib.raw.kernel_level("int8_amx_gemm") != "amx":
        raise SystemExit("int8_amx_gemm needs a CPU with AMX (and a build with its amx level)")
    keep_freed_memory()
    g = torch.Generator().manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        for k, n, unary, out_dtype in SHAPES:
            weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
            w_scales = torch.rand(n, generator=g) * 0.02 / 127
            bias = torch.randn(n, generator=g)
            folded, zp = fold_input_zero_point(weight, w_scales, bias, X_SCALE, X_ZERO_POINT)
            dst = "uint8" if out_dtype == torch.uint8 else "bfloat16"
            onednn = onednn_direct.raw.Linear(weight, w_scales, folded, "uint8", dst, post_op=unary,
                                              x_scale=X_SCALE, x_zero_point=zp, y_scale=Y_SCALE,
                                              y_zero_point=Y_ZERO_POINT)
            packed, sums = pack_int8_amx_weight(weight)
            scales = (torch.tensor(X_SCALE, dtype=torch.float64) * w_scales.double()).float()
            layers.append((k, n, unary, out_dtype, onednn, packed, sums, scales, bias))
    threads = torch.get_num_threads()
    print(f"{len(layers)} layers, {sum(k * n for k, n, *_ in layers) / 1e6:.0f} MB of int8 weights, {threads} threads\n")
    print("| rows | oneDNN ms | int8_amx_gemm ms | ours / oneDNN | oneDNN TOP/s | ours TOP/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for rows in args.rows:
        xs = {k: torch.randint(0, 256, (rows, k), dtype=torch.uint8, generator=g) for k in (768, 3072)}
        outs = {(n, d): torch.empty(rows, n, dtype=d) for _, n, _, d in SHAPES}
        outs_b = {(n, d): torch.empty(rows, n, dtype=d) for _, n, _, d in SHAPES}

        def onednn_layer(k, n, unary, out_dtype, onednn, *_):
            onednn.run(xs[k], outs[(n, out_dtype)])
            return outs[(n, out_dtype)]

        def amx_layer(k, n, unary, out_dtype, _onednn, packed, sums, scales, bias):
            out = outs_b[(n, out_dtype)]
            native_lib.raw.int8_amx_gemm(xs[k], X_ZERO_POINT, packed, sums, n, scales, bias, False, out, Y_SCALE,
                                         Y_ZERO_POINT, None, threads, gelu=unary == "gelu")
            return out

        for layer in layers[:len(SHAPES)]:
            a, b = onednn_layer(*layer).float(), amx_layer(*layer).float()
            diff = (a - b).abs().max().item() if layer[3] == torch.uint8 else ((a - b).abs().max() / a.abs().max()).item()
            assert diff <= (1 if layer[3] == torch.uint8 else 1e-2), f"{rows} rows, {layer[:4]}: differ by {diff}"
        print(layer_pass_row(rows, layers, onednn_layer, amx_layer, args.rounds, args.calls), flush=True)


if __name__ == "__main__":
    main()
