"""Micro-benchmark behind convolutions run as matmuls (native/dnnl/conv.cpp): ResNet-50's 1x1
and 3x3 stride-2 layer shapes run by oneDNN's convolution primitive and by a matmul over the NHWC
rows (1x1) or im2col rows (3x3, int8 only),
the same ipexconvert._dnnl.Conv either way (lowering="convolution" / "matmul"; the default
"auto" takes the matmul where conv.cpp says), in interleaved rounds in one
process; medians, us per call. Outputs are compared first.

    python benchmarks/conv_as_matmul.py --rounds 7
"""
from __future__ import annotations

import argparse

import torch
from timing import interleaved_us as interleaved  # same folder: the interleaved-rounds timer

from ipexconvert.backends.cpu import onednn_direct as dnnl

# (batch, in channels, input height = width, out channels, kernel, stride): 1x1 layers at 56, 14
# and 7 pixels, then the 3x3 stride-2 layers of the last three stages.
SHAPES = [(16, 64, 56, 256, 1, 1), (1, 64, 56, 256, 1, 1), (16, 256, 14, 1024, 1, 1), (16, 2048, 7, 512, 1, 1),
          (16, 512, 7, 2048, 1, 1), (1, 512, 7, 2048, 1, 1), (1, 2048, 7, 512, 1, 1),
          (16, 128, 56, 128, 3, 2), (16, 256, 28, 256, 3, 2), (16, 512, 14, 512, 3, 2), (1, 512, 14, 512, 3, 2)]
DTYPES = ("uint8", "bfloat16", "float32")


def layers(dtype: str, c: int, oc: int, kernel: int, stride: int):
    """The same layer (ReLU fused) as a convolution primitive and as a matmul."""
    g = torch.Generator().manual_seed(0)
    bias = torch.randn(oc, generator=g)
    if dtype == "uint8":
        w = torch.randint(-127, 128, (oc, c, kernel, kernel), dtype=torch.int8, generator=g)
        args = dict(w_scales=torch.rand(oc, generator=g) * 1e-2, src="uint8", dst="uint8", x_scale=0.02, y_scale=0.05)
    else:
        w = torch.randn(oc, c, kernel, kernel, generator=g).to(getattr(torch, dtype))
        args = dict(w_scales=None, src=dtype, dst=dtype)
    return [dnnl.raw.Conv(w, bias=bias, stride=(stride,) * 2, padding=(kernel // 2,) * 2, dilation=(1, 1), relu=True,
                          lowering=how, **args) for how in ("convolution", "matmul")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if dnnl.raw is None:
        raise SystemExit("ipexconvert._dnnl is not built")
    print("| dtype | [batch, in, hw, out], kernel / stride | convolution (us) | matmul (us) | ratio | max difference |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for dtype in DTYPES:
        for batch, c, hw, oc, kernel, stride in SHAPES:
            if kernel > 1 and dtype != "uint8":
                continue  # im2col rows are written for uint8 only
            conv, matmul = layers(dtype, c, oc, kernel, stride)
            out_hw = (hw + 2 * (kernel // 2) - kernel) // stride + 1
            g = torch.Generator().manual_seed(1)
            x = (torch.randint(0, 256, (batch, c, hw, hw), dtype=torch.uint8, generator=g) if dtype == "uint8"
                 else torch.randn(batch, c, hw, hw, generator=g).to(getattr(torch, dtype)))
            x = x.contiguous(memory_format=torch.channels_last)
            out_dtype = torch.uint8 if dtype == "uint8" else x.dtype
            a, b = (torch.empty((batch, oc, out_hw, out_hw), dtype=out_dtype, memory_format=torch.channels_last)
                    for _ in "ab")
            conv.run(x, a)
            matmul.run(x, b)
            diff = (a.float() - b.float()).abs().max().item()
            t = interleaved({"conv": lambda: conv.run(x, a), "matmul": lambda: matmul.run(x, b)}, args.rounds, args.calls)
            print(f"| {dtype} | {[batch, c, hw, oc]}, {kernel}x{kernel} / {stride} | {t['conv']:.0f} | {t['matmul']:.0f} | "
                  f"{t['matmul'] / t['conv']:.2f} | {diff:.3g} |")


if __name__ == "__main__":
    main()
