"""Micro-benchmark behind the native kernels at a CNN's two ends (docs/native.md), ResNet-50's sizes:
- to_channels_last: the NCHW float32 input made channels-last for the first convolution, the way
  the graph did it before fuse_layout_change (torch's bf16 cast and channels-last copy, then the
  native quantize for int8), against one to_channels_last call. Checked for identical values first.
- spatial_mean: global average pooling of the last convolution's channels-last [N, 2048, 7, 7]
  output, torch's adaptive_avg_pool2d against the native kernel. Checked within bf16/fp32 rounding.
Timed in interleaved rounds in one process; medians, us per call.

    python benchmarks/cnn_edges.py --rounds 9
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from direct_linear import timing_arguments
from timing import interleaved_us as interleaved
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "native"))
import native_ops as native  # noqa: E402  (the torch harness over the native kernels)
from ipexconvert.backends.cpu.kernels._native import to_channels_last as channels_last_kernel

CL = torch.channels_last
SCALE, ZERO_POINT = 0.0308, 129  # ResNet-50's input quantization, roughly


def to_channels_last(x: torch.Tensor, dtype: torch.dtype, scale: float = 1.0, zero_point: int = 0) -> torch.Tensor:
    """As the runtime kernels call it (the extension directly: the wrapper's argument checks, tens
    of us at batch 1, run once per node at load there)."""
    return channels_last_kernel(x, dtype, native.selected_level(), scale, zero_point)


def spatial_mean(y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(y.shape[:2], dtype=y.dtype)
    native.raw.spatial_mean(y.permute(0, 2, 3, 1), True, out, None, torch.get_num_threads())
    return out.view(*y.shape[:2], 1, 1)


def variants(batch: int) -> dict:
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0))

    def torch_int8():  # to_dtype -> to_memory_format -> quantize (through its NHWC view)
        nhwc = x.to(torch.bfloat16).contiguous(memory_format=CL).permute(0, 2, 3, 1)
        return native.quantize_per_tensor(nhwc, SCALE, ZERO_POINT, torch.uint8).permute(0, 3, 1, 2)

    return {
        "uint8 torch": torch_int8,
        # from the bf16 rounding, to compare codes; the fused quantize reads float32 (next row)
        "uint8 native": lambda: to_channels_last(x.to(torch.bfloat16), torch.uint8, SCALE, ZERO_POINT),
        "uint8 native from float32": lambda: to_channels_last(x, torch.uint8, SCALE, ZERO_POINT),
        "bf16 torch": lambda: x.to(torch.bfloat16).contiguous(memory_format=CL),
        "bf16 native": lambda: to_channels_last(x, torch.bfloat16),
        "fp32 torch": lambda: x.contiguous(memory_format=CL),
        "fp32 native": lambda: to_channels_last(x, torch.float32),
    }


def pooling(batch: int) -> dict:
    fns = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        y = torch.randn(batch, 2048, 7, 7, generator=torch.Generator().manual_seed(1)).to(dtype).contiguous(memory_format=CL)
        fns[f"pool {name} torch"] = lambda y=y: torch.nn.functional.adaptive_avg_pool2d(y, 1)
        fns[f"pool {name} native"] = lambda y=y: spatial_mean(y)
    return fns


def main() -> None:
    args = timing_arguments(__doc__, calls=10)
    print("| batch | what | torch (us) | native (us) | native / torch |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for batch in (1, 16):
        fns = variants(batch)
        for kind in ("uint8", "bf16", "fp32"):
            assert torch.equal(fns[f"{kind} torch"](), fns[f"{kind} native"]()), f"{kind} differs at batch {batch}"
        t = interleaved(fns, args.rounds, args.calls)
        for kind in ("uint8", "bf16", "fp32"):
            print(f"| {batch} | {kind} | {t[f'{kind} torch']:.0f} | {t[f'{kind} native']:.0f} | "
                  f"{t[f'{kind} native'] / t[f'{kind} torch']:.2f} |")
        print(f"| {batch} | uint8 from float32 (what the fused quantize runs) | {t['uint8 torch']:.0f} | "
              f"{t['uint8 native from float32']:.0f} | {t['uint8 native from float32'] / t['uint8 torch']:.2f} |")
        pools = pooling(batch)
        for kind in ("bf16", "fp32"):
            want, got = pools[f"pool {kind} torch"]().float(), pools[f"pool {kind} native"]().float()
            assert ((got - want).abs().max() / want.abs().max()).item() < (1e-2 if kind == "bf16" else 1e-5), kind
        t = interleaved(pools, args.rounds, args.calls)
        for kind in ("bf16", "fp32"):
            print(f"| {batch} | global average pool {kind} [{batch}, 2048, 7, 7] | {t[f'pool {kind} torch']:.0f} | "
                  f"{t[f'pool {kind} native']:.0f} | {t[f'pool {kind} native'] / t[f'pool {kind} torch']:.2f} |")


if __name__ == "__main__":
    main()
