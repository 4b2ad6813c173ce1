"""Micro-benchmarks behind two INT8 design choices (docs/quantization.md, "Design choices, measured").

1. Activation type: uint8 with a zero point (asymmetric, what ipexconvert emits) against int8
   with zero point 0 (symmetric), through the same oneDNN kernels, at BERT-base GEMM shapes.
2. Attention: bf16 scaled-dot-product attention (what INT8 artifacts run) against an INT8
   attention made of the int8 products torch offers on CPU (quantize q, k and the
   probabilities per tensor, int8 x int8 -> int32 products with torch._int_mm per head, dequantize), at BERT-base shapes.

Every variant is checked against a float reference first, then timed in interleaved rounds in
one process; medians are reported. Run from the repository root on an idle machine:

    python benchmarks/int8_choices.py --rounds 7 --name int8-choices
"""
from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from timing import interleaved_us  # benchmarks/ is on sys.path as the script's folder

RESULTS = Path(__file__).resolve().parent / "results"


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


def activation_types(rounds: int) -> list[str]:
    qlinear, prepack = torch.ops.onednn.qlinear_pointwise, torch.ops.onednn.qlinear_prepack
    lines = ["| GEMM (M x K x N) | uint8, zero point 128 (us) | int8, zero point 0 (us) | int8 / uint8 |",
             "| --- | ---: | ---: | ---: |"]
    gen = torch.Generator().manual_seed(0)
    for m, k, n in [(128, 768, 2304), (128, 768, 3072), (128, 3072, 768), (1024, 768, 3072)]:
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
        w_scales = torch.rand(n, generator=gen) * 2e-3 + 1e-3
        x_u8 = torch.randint(0, 256, (m, k), dtype=torch.uint8, generator=gen)
        x_s8 = (x_u8.int() - 128).to(torch.int8)  # the same real values, symmetric
        packed, zeros, bias = prepack(weight, None), torch.zeros(n, dtype=torch.int64), torch.zeros(n)
        variants = {
            "u8": lambda: qlinear(x_u8, 0.02, 128, packed, w_scales, zeros, bias, 1.0, 0, torch.bfloat16, "none", [], ""),
            "s8": lambda: qlinear(x_s8, 0.02, 0, packed, w_scales, zeros, bias, 1.0, 0, torch.bfloat16, "none", [], ""),
        }
        want = ((x_u8.float() - 128) * 0.02) @ (weight.float() * w_scales[:, None]).t()
        for name, fn in variants.items():
            err = rel_error(fn(), want)
            assert err < 1e-2, f"{name} {m}x{k}x{n}: relative error {err}"
        us = interleaved_us(variants, rounds, 20)
        lines.append(f"| {m} x {k} x {n} | {us['u8']:.0f} | {us['s8']:.0f} | {us['s8'] / us['u8']:.2f} |")
    return lines


def quantize_per_tensor(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.clamp(torch.round(x.float() / scale), -127, 127).to(torch.int8)


def attention(rounds: int) -> list[str]:
    lines = ["| batch x heads x seq x head_dim | bf16 SDPA (us) | int8 bmm attention (us) | int8 / bf16 | int8 relative error |",
             "| --- | ---: | ---: | ---: | ---: |"]
    gen = torch.Generator().manual_seed(1)
    for batch, heads, seq, dim in [(1, 12, 128, 64), (8, 12, 128, 64)]:
        q, k, v = (torch.randn(batch, heads, seq, dim, generator=gen).bfloat16() for _ in range(3))
        mask = torch.ones(batch, 1, seq, seq, dtype=torch.bool)
        scale = 1.0 / math.sqrt(dim)
        # Per-tensor scales, as calibration would set them (here from the data itself: the best case).
        sq, sk, sv = (float(t.float().abs().amax()) / 127 for t in (q, k, v))

        def int8_attention():
            qi, ki, vi = quantize_per_tensor(q, sq), quantize_per_tensor(k, sk), quantize_per_tensor(v, sv)
            flat = batch * heads
            qf, kf, vf = qi.reshape(flat, seq, dim), ki.reshape(flat, seq, dim), vi.reshape(flat, seq, dim)
            # torch.bmm on int8 accumulates in int8 (wraps); _int_mm accumulates in int32, one head at a time.
            scores = torch.stack([torch._int_mm(qf[h], kf[h].t().contiguous()) for h in range(flat)])
            probs = torch.softmax(scores.float() * (sq * sk * scale), dim=-1)
            sp = float(probs.amax()) / 127  # probabilities are small: scale to the largest one
            pi = torch.round(probs / sp).to(torch.int8)
            out = torch.stack([torch._int_mm(pi[h], vf[h]) for h in range(flat)]).float() * (sp * sv)
            return out.reshape(batch, heads, seq, dim).to(torch.bfloat16)

        variants = {
            "bf16": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            "int8": int8_attention,
        }
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
        errors = {name: rel_error(fn(), want) for name, fn in variants.items()}
        assert errors["int8"] < 0.1, f"int8 attention is wrong: relative error {errors['int8']}"
        with torch.inference_mode():
            us = interleaved_us(variants, rounds, 10)
        lines.append(f"| {batch} x {heads} x {seq} x {dim} | {us['bf16']:.0f} | {us['int8']:.0f} | "
                     f"{us['int8'] / us['bf16']:.2f} | {errors['int8']:.3f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default="int8-choices")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    command = "python benchmarks/int8_choices.py " + " ".join(sys.argv[1:])
    report = [f"# INT8 design choices, measured (`{args.name}`)", "", "Produced by:", "", "```bash", command, "```", "",
              f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
              f"- torch {torch.__version__}, {args.threads} threads, {args.rounds} interleaved rounds, medians", "",
              "## Activation type (oneDNN qlinear, bf16 output)", "", *activation_types(args.rounds), "",
              "oneDNN's int8 convolution (`onednn.qconv2d_pointwise`) takes uint8 activations only.", "",
              "## Attention", "", *attention(args.rounds), ""]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{args.name}.md"
    out.write_text("\n".join(report))
    print("\n".join(report))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
