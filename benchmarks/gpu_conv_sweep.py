"""Times the GPU's int8 convolution (an implicit GEMM with its epilogue, _triton_int8.run_int8_conv) on ResNet-50's
convolution shapes for several tile choices, beside the TF32 path (codes to float32, cuDNN's TF32 convolution,
the Triton epilogue) and cuDNN's bf16 convolution of the same shape. GPU time of replayed CUDA graphs.

    python benchmarks/gpu_conv_sweep.py --batches 1,64
    python benchmarks/gpu_conv_sweep.py --batches 64 --shapes all --tiles wide --gemm

--tiles wide adds larger tiles (up to 256 x 256) and 8 warps; --shapes all adds the 1x1 layers that narrow the
channels, the stride-2 shortcut and the 7x7 stem; --gemm also times each 1x1 stride-1 convolution as the int8 GEMM
it is (_triton_int8.run_int8_gemm on the channels-last rows, with and without TMA loads); --im2col times only the
stem's im2col rows (_triton_int8.run_im2col_codes) for several program shapes.
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
MORE_SHAPES = [(256, 56, 64, 1, 1), (128, 28, 512, 1, 1), (512, 28, 128, 1, 1), (1024, 14, 256, 1, 1),
               (2048, 7, 512, 1, 1), (256, 56, 512, 1, 2), (3, 224, 64, 7, 2)]


GEMM_SWEEP_TILES = [GemmTile(bm, bn, 128, 8, warps, 3) for bm, bn, warps in
                    ((64, 128, 4), (128, 64, 4), (128, 128, 8), (128, 256, 8), (256, 128, 8))]


def sweep_tiles(kind: str) -> list[GemmTile]:
    if kind == "narrow":
        return [GemmTile(bm, bn, 128, 8, 4, stages)
                for bm, bn, stages in itertools.product((32, 64, 128), (32, 64, 128), (3, 4))]
    return [GemmTile(bm, bn, 128, 8, warps, stages) for bm, bn, (warps, stages)
            in itertools.product((64, 128, 256), (64, 128, 256), ((4, 3), (8, 3), (8, 4)))
            if bm * bn <= 128 * 256]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--tiles", choices=["narrow", "wide"], default="narrow")
    ap.add_argument("--shapes", choices=["resnet", "all"], default="resnet")
    ap.add_argument("--gemm", action="store_true", help="also time 1x1 stride-1 convolutions as the int8 GEMM")
    ap.add_argument("--im2col", action="store_true", help="only time the stem's im2col rows, by program shape")
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    if args.im2col:
        for batch in (int(b) for b in args.batches.split(",")):
            time_im2col(batch, gpu)
        return
    tiles = sweep_tiles(args.tiles)
    # (all: the most frequent kinds first, so a run cut short by a time limit has measured them)
    shapes = SHAPES if args.shapes == "resnet" else sorted(SHAPES + MORE_SHAPES, key=lambda s: (s[3] != 1, -s[1]))
    for batch, (c, size, cout, k, stride) in itertools.product((int(b) for b in args.batches.split(",")), shapes):
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
            print(f"   int8 {tile.block_m}x{tile.block_n} warps {tile.warps} stages {tile.stages}: {ms * 1000:.1f} us "
                  f"({ops / ms / 1e9:.0f} TOP/s){'  (default)' if tile == default else ''}", flush=True)
        chosen = [ms for ms, tile in results if tile == default]
        if chosen:
            print(f"   int8 the default tile: {chosen[0] * 1000:.1f} us", flush=True)
        if args.gemm and k == 1 and stride == 1:
            time_as_gemm(x, weight, offset, scale, bias, codes, quantize, GEMM_SWEEP_TILES, ops, args.top)


def time_im2col(batch: int, gpu: torch.device) -> None:
    """The stem's im2col rows (3 channels, 7x7, stride 2, 224 x 224) for each (rows, columns, warps) of a program."""
    x = torch.randint(0, 256, (batch, 3, 224, 224), dtype=torch.uint8, device=gpu).contiguous(
        memory_format=torch.channels_last)
    written = batch * 112 * 112 * _triton_int8.im2col_depth(3, 49)
    results = []
    for blocks in itertools.product((16, 32, 64, 128, 256), (32, 64, 128, 256), (4, 8)):
        if not 2048 <= blocks[0] * blocks[1] <= 16384:
            continue
        ms = gpu_graph_ms([lambda: _triton_int8.run_im2col_codes(x, (7, 7), (2, 2), (3, 3), (1, 1), 131, blocks)] * 4)
        results.append((ms, blocks))
    for ms, blocks in sorted(results)[:6]:
        print(f"b{batch} stem im2col rows {blocks[0]} x columns {blocks[1]}, {blocks[2]} warps: {ms * 1000:.1f} us "
              f"({written / ms / 1e6:.0f} GB/s written){'  (default)' if blocks == _triton_int8.IM2COL_BLOCKS else ''}",
              flush=True)
    default = [ms for ms, blocks in results if blocks == _triton_int8.IM2COL_BLOCKS]
    if default:
        print(f"b{batch} stem im2col, the default blocks: {default[0] * 1000:.1f} us", flush=True)


def time_as_gemm(x, weight, offset, scale, bias, codes, quantize, tiles, ops, top) -> None:
    """A 1x1 stride-1 convolution as the int8 GEMM of its channels-last rows, for each tile with and without TMA."""
    n, c, h, w = x.shape
    rows, flat = x.permute(0, 2, 3, 1).reshape(-1, c), weight.reshape(weight.shape[0], c).contiguous()
    results = []
    for tile in tiles:
        for tma in (False, True):
            t = GemmTile(tile.block_m, tile.block_n, tile.block_k, tile.group_m, tile.warps, tile.stages, tma)
            try:
                ms = gpu_graph_ms([lambda: _triton_int8.run_int8_gemm(
                    rows, flat, True, offset, scale, bias, codes, [], (n, h, w, flat.shape[0]), torch.uint8,
                    quantize, tile=t)] * 4)
            except Exception as e:
                print(f"   gemm {t}: {type(e).__name__}", flush=True)
                continue
            results.append((ms, t))
    for ms, t in sorted(results, key=lambda r: r[0])[:top]:
        print(f"   as GEMM {t.block_m}x{t.block_n} warps {t.warps} stages {t.stages} tma {t.tma}: {ms * 1000:.1f} us "
              f"({ops / ms / 1e9:.0f} TOP/s)", flush=True)


if __name__ == "__main__":
    main()
