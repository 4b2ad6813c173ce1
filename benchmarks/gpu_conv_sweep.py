"""Times the GPU's int8 convolution (an implicit GEMM with its epilogue, _triton_int8.run_int8_conv) on ResNet-50's
convolution shapes for several tile choices, beside the TF32 path (codes to float32, cuDNN's TF32 convolution,
the Triton epilogue) and cuDNN's bf16 convolution of the same shape. GPU time of replayed CUDA graphs.

    python benchmarks/gpu_conv_sweep.py --batches 1,64
"""
from __future__ import annotations

import argparse
import itertools

import torch
import torch.nn.functional as F

from ipexconvert.backends.cuda.kernels import _triton_int8
from ipexconvert.backends.cuda.kernels._triton_int8 import GemmTile
from timing import gpu_graph_ms

# (input channels, size, output channels, kernel, stride): ResNet-50's kinds of convolution
SHAPES = [(64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (128, 56, 128, 3, 2), (256, 14, 256, 3, 1), (512, 7, 512, 3, 1),
          (512, 7, 2048, 1, 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    tiles = [GemmTile(bm, bn, 128, 8, 4, stages) for bm, bn, stages in itertools.product((32, 64, 128), (32, 64, 128),
                                                                                          (3, 4))]
    for batch, (c, size, cout, k, stride) in itertools.product((int(b) for b in args.batches.split(",")), SHAPES):
        pad = k // 2
        x = torch.randint(0, 256, (batch, c, size, size), dtype=torch.uint8, device=gpu).contiguous(
            memory_format=torch.channels_last)
        weight = torch.randint(-127, 128, (cout, c, k, k), dtype=torch.int8, device=gpu)
        taps = weight.permute(0, 2, 3, 1).contiguous()
        offset = torch.zeros(cout, dtype=torch.int32, device=gpu)
        scale = torch.full((cout,), 1e-4, device=gpu)
        bias = torch.randn(cout, device=gpu)
        codes, quantize = [1, 0, 0, 0], (0.05, 3, "uint8")  # relu, then uint8 codes: a ResNet block's inner conv
        wf = weight.float().contiguous(memory_format=torch.channels_last)
        xb = torch.randn(batch, c, size, size, dtype=torch.bfloat16, device=gpu).contiguous(
            memory_format=torch.channels_last)
        wb = torch.randn(cout, c, k, k, dtype=torch.bfloat16, device=gpu).contiguous(memory_format=torch.channels_last)

        def tf32():
            with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=True):
                y = F.conv2d(_triton_int8.run_codes_minus_zero_point(x, 131), wf, None, stride, pad)
            n, co, h, w = y.shape
            return _triton_int8.run_epilogue(y.permute(0, 2, 3, 1).reshape(-1, co), offset, scale, bias, codes, [],
                                             (n, h, w, co), torch.uint8, quantize)

        def bf16():
            with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=True):
                return torch.relu_(F.conv2d(xb, wb, bias.bfloat16(), stride, pad))

        ops = 2 * batch * (size // stride) ** 2 * cout * c * k * k
        t_tf32, t_bf16 = gpu_graph_ms([tf32] * 4), gpu_graph_ms([bf16] * 4)
        print(f"b{batch} {c}->{cout} {k}x{k} s{stride} at {size}: cuDNN bf16 {t_bf16 * 1000:.1f} us, "
              f"TF32 path {t_tf32 * 1000:.1f} us", flush=True)
        results = []
        for tile in tiles:
            try:
                ms = gpu_graph_ms([lambda: _triton_int8.run_int8_conv(x, taps, True, 131, (stride, stride), (pad, pad),
                                                                 (1, 1), offset, scale, bias, codes, [], torch.uint8,
                                                                 quantize, None, tile=tile)] * 4)
            except Exception as e:  # a tile beyond the shared memory or registers
                print(f"   {tile}: {type(e).__name__}", flush=True)
                continue
            results.append((ms, tile))
        default = _triton_int8.conv_tile(batch * (size // stride) ** 2, cout)
        for ms, tile in sorted(results, key=lambda r: r[0])[:args.top]:
            print(f"   int8 {tile.block_m}x{tile.block_n} stages {tile.stages}: {ms * 1000:.1f} us "
                  f"({ops / ms / 1e9:.0f} TOP/s){'  (default)' if tile == default else ''}", flush=True)
        chosen = [ms for ms, tile in results if tile == default]
        if chosen:
            print(f"   int8 the default tile: {chosen[0] * 1000:.1f} us", flush=True)


if __name__ == "__main__":
    main()
