"""Micro-benchmark behind the native attention kernels (docs/native.md): torch's
scaled_dot_product_attention (then the transpose + reshape a model does next) against the native attention
kernel (tests/native/native_ops.attention) on slices of one packed QKV projection, with a padding mask, in bf16
(kernel `attention`: AMX tiles or AVX512-BF16) or fp32 (`attention_f32`: AVX2 or AVX-512 FMA;
`IPEXCONVERT_MAX_ISA=avx2` caps it and torch's ATen alike). Each pair is checked against an fp32 reference first,
then timed in interleaved rounds in one process; medians, us per call.

    python benchmarks/attention.py --rounds 9 [--dtype float32]
"""
from __future__ import annotations

import sys
from pathlib import Path

import ipexconvert  # noqa: F401  (before torch runs an op: IPEXCONVERT_MAX_ISA caps ATen too)
import torch

from direct_linear import timing_arguments
from timing import interleaved_us as interleaved
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "native"))
import native_ops as native  # noqa: E402  (the torch harness over the native kernels)

# batch, heads, seq, head_dim: BERT-base at batch 1 and 8, all-MiniLM-L6-v2 at batch 32.
SHAPES = [(1, 12, 128, 64), (8, 12, 128, 64), (32, 12, 128, 32)]


# normalised error the native kernel must stay within before it is timed
THRESHOLDS = {"bfloat16": 1e-2, "float32": 1e-5}


def variants(batch: int, heads: int, seq: int, head_dim: int, dtype: torch.dtype) -> tuple[dict, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(batch, seq, 3 * heads * head_dim, generator=g).to(dtype)
    q, k, v = (t.reshape(batch, seq, heads, head_dim).permute(0, 2, 1, 3) for t in qkv.split(heads * head_dim, -1))
    mask = torch.zeros(batch, 1, 1, seq, dtype=dtype)
    mask[..., seq * 3 // 4:] = torch.finfo(dtype).min  # the last quarter is padding
    fns = {
        "torch": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
        .reshape(batch, seq, heads * head_dim),
        "native": lambda: native.attention(q, k, v, mask).transpose(1, 2).reshape(batch, seq, heads * head_dim),
    }
    scores = (q.float() @ k.float().transpose(-1, -2)) / head_dim ** 0.5 + mask.float()
    want = (torch.softmax(scores, -1) @ v.float()).transpose(1, 2).reshape(batch, seq, heads * head_dim)
    return fns, want


def main() -> None:
    args = timing_arguments(__doc__, calls=20,
                            extra=lambda p: p.add_argument("--dtype", choices=sorted(THRESHOLDS), default="bfloat16"))
    dtype = getattr(torch, args.dtype)
    print("| [batch x heads x seq x head_dim] | torch (us) | native (us) | native / torch | error torch | error native |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    with torch.inference_mode():
        for shape in SHAPES:
            fns, want = variants(*shape, dtype)
            errors = {name: ((fn().float() - want).abs().max() / want.abs().max()).item() for name, fn in fns.items()}
            assert errors["native"] < THRESHOLDS[args.dtype], f"{shape}: native attention disagrees ({errors['native']:.3g})"
            t = interleaved(fns, args.rounds, args.calls)
            print(f"| {' x '.join(map(str, shape))} | {t['torch']:.0f} | {t['native']:.0f} | "
                  f"{t['native'] / t['torch']:.2f} | {errors['torch']:.2g} | {errors['native']:.2g} |")


if __name__ == "__main__":
    main()
