"""Micro-benchmark behind merge_shortcut_conv (docs/quantization.md): ResNet-50's four projection
blocks, each block's last 1x1 conv with the shortcut's 1x1 conv summed into it (two direct oneDNN
convs, the second with the residual sum fused), against the native concat of [main path |
subsampled block input] and one 1x1 conv over both. uint8 x int8 with uint8 output, and bf16.
Random data and weights; the merged conv is checked against the pair first (bf16: within bf16
rounding; int8 at the codes' scale). Interleaved rounds in one process; medians, ms per call,
summed over the four blocks.

    python benchmarks/shortcut_merge.py --rounds 9
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from direct_linear import timing_arguments
from timing import interleaved_us as interleaved
from ipexconvert.backends.cpu import onednn_direct as dnnl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "native"))
import native_ops as native  # noqa: E402  (the torch harness over the native kernels)

CL = torch.channels_last
# ResNet-50's projection blocks: (block input channels, its size, main-path channels, output size, out channels, stride)
BLOCKS = [(64, 56, 64, 56, 256, 1), (256, 56, 128, 28, 512, 2), (512, 28, 256, 14, 1024, 2), (1024, 14, 512, 7, 2048, 2)]
X_SCALE, Y_SCALE, SHORTCUT_ZERO_POINT = 0.05, 0.2, 128  # the shortcut's output is signed: uint8 around 128


def _conv(kind: str, weight: torch.Tensor, bias: torch.Tensor, stride: int, relu: bool, summed: bool):
    if kind == "int8":
        scales = torch.full((weight.shape[0],), 1e-3)
        shortcut = not relu and not summed
        return dnnl.raw.Conv(weight, scales, bias, (stride, stride), (0, 0), (1, 1), "uint8", "uint8", relu=relu,
                             sum=summed, sum_scale=Y_SCALE if summed else 1.0,
                             sum_zero_point=SHORTCUT_ZERO_POINT if summed else 0, x_scale=X_SCALE, y_scale=Y_SCALE,
                             y_zero_point=SHORTCUT_ZERO_POINT if shortcut else 0)
    return dnnl.raw.Conv(weight, None, bias, (stride, stride), (0, 0), (1, 1), "bfloat16", "bfloat16", relu=relu,
                         sum=summed)


def block(kind: str, batch: int, c0: int, h0: int, c3: int, h: int, out_channels: int, stride: int, g):
    """(separate, merged) callables for one block, both returning the block output."""
    dtype = torch.uint8 if kind == "int8" else torch.bfloat16
    if kind == "int8":
        x0 = torch.randint(0, 40, (batch, c0, h0, h0), dtype=dtype, generator=g).contiguous(memory_format=CL)
        x3 = torch.randint(0, 40, (batch, c3, h, h), dtype=dtype, generator=g).contiguous(memory_format=CL)
        w3 = torch.randint(-60, 61, (out_channels, c3, 1, 1), dtype=torch.int8, generator=g)
        wd = torch.randint(-60, 61, (out_channels, c0, 1, 1), dtype=torch.int8, generator=g)
    else:
        x0 = torch.randn(batch, c0, h0, h0, generator=g).to(dtype).contiguous(memory_format=CL)
        x3 = torch.randn(batch, c3, h, h, generator=g).to(dtype).contiguous(memory_format=CL)
        w3 = (torch.randn(out_channels, c3, 1, 1, generator=g) / c3 ** 0.5).to(dtype)
        wd = (torch.randn(out_channels, c0, 1, 1, generator=g) / c0 ** 0.5).to(dtype)
    b3, bd = torch.randn(out_channels, generator=g), torch.randn(out_channels, generator=g)
    shortcut, last = _conv(kind, wd, bd, stride, False, False), _conv(kind, w3, b3, 1, True, True)
    merged = _conv(kind, torch.cat([w3, wd], 1), b3 + bd, 1, True, False)  # int8: both inputs in one scale here

    def output():
        return torch.empty((batch, h, h, out_channels), dtype=dtype).permute(0, 3, 1, 2)

    def separate():
        y = output()
        shortcut.run(x0, y)  # the shortcut's output (int8: uint8 around 128), summed into by the last conv
        last.run(x3, y)
        return y

    def together():
        y = output()
        merged.run(native.concat_channels(x3, x0[:, :, ::stride, ::stride]), y)
        return y

    return separate, together


def main() -> None:
    args = timing_arguments(__doc__, calls=3)
    print("| batch | dtype | two convs (ms) | concat + one conv (ms) | ratio |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for batch in (1, 16):
        for kind in ("int8", "bf16"):
            g = torch.Generator().manual_seed(0)
            pairs = [block(kind, batch, *b, g) for b in BLOCKS]
            for separate, together in pairs:
                a, b = separate().float(), together().float()
                # int8: the pair requantizes the shortcut's output once more (one code apart at most)
                limit = 1.0 if kind == "int8" else 2e-2 * a.abs().max().item()
                assert (a - b).abs().max().item() <= limit, f"{kind} batch {batch} disagrees"
            fns = {"two": lambda: [s() for s, _ in pairs], "one": lambda: [t() for _, t in pairs]}
            t = interleaved(fns, args.rounds, args.calls)
            print(f"| {batch} | {kind} | {t['two'] / 1e3:.2f} | {t['one'] / 1e3:.2f} | {t['one'] / t['two']:.2f} |")


if __name__ == "__main__":
    main()
