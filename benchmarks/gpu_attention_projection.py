"""sdpa_woq_linear's fused kernel (the output projection combining the attention's key splits as it reads them)
against the two kernels it replaces (attention_rows with its own combine, then woq_rows) and against the op's
float32 reference, on one decode row of TinyLlama's shapes (32 query heads of 64, 4 key/value heads, o projection
2048 x 2048 int4 g128, bf16): how far each is from the reference and from the other. The fused kernel adds the
splits in another order, so the two need not agree to the bit; this says whether they differ by rounding only.

    python benchmarks/gpu_attention_projection.py [--keys 544,1920] [--seeds 10]      (on a GPU)
    TRITON_INTERPRET=1 PYTHONPATH=/tmp/tripkg python benchmarks/gpu_attention_projection.py --small --dtype float32
"""
from __future__ import annotations

import argparse

import torch

from ipexconvert.backends.cuda.kernels import sdpa, sdpa_woq_linear, woq_linear
from ipexconvert.ir import TensorSpec, get_op
from ipexconvert.runtime.kernels import NodeContext


def context(op_name: str, attrs, inputs: list, constant_slots: range) -> NodeContext:
    op = get_op(op_name)
    specs = tuple(None if t is None else TensorSpec.of(t) for t in inputs)
    constants = tuple(t if i in constant_slots else None for i, t in enumerate(inputs))
    return NodeContext(op=op_name, attrs=attrs, constants=constants, input_specs=specs,
                       output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm_90")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", default="544,1920")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--small", action="store_true", help="8 query heads, 2 kv heads (for the interpreter)")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    heads, kv_heads, d = (8, 2, 64) if args.small else (32, 4, 64)
    k = n = heads * d
    op = get_op("sdpa_woq_linear")
    attrs = op.parse_attrs({"bits": 4, "group_size": 128, "attention": {"enable_gqa": True}})
    for keys in map(int, args.keys.split(",")):
        rows = []
        for seed in range(args.seeds):
            g = torch.Generator().manual_seed(seed)
            q = torch.randn(1, heads, 1, d, generator=g).to(dtype)
            cache_k, cache_v = (torch.randn(1, kv_heads, keys, d, generator=g).to(dtype) for _ in range(2))
            mask = torch.zeros(1, 1, 1, keys)
            mask[..., keys - 5:] = float("-inf")  # (a static cache's unwritten positions)
            codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
            scales = torch.rand(n, k // 128, generator=g) * 0.02
            inputs = [t.to(device) for t in (q, cache_k, cache_v, mask.to(dtype), codes, scales)] + [None, None]
            q, cache_k, cache_v, mask = inputs[:4]
            fused = sdpa_woq_linear.triton_sdpa_woq_linear(context(op.name, attrs, inputs, range(4, 8)))
            got = fused.fn([q, cache_k, cache_v, mask, None, None, None, None], {})
            sd_attrs = get_op("sdpa").parse_attrs({"enable_gqa": True})
            heads_out = sdpa.triton_sdpa(context("sdpa", sd_attrs, inputs[:4], range(0))).fn(inputs[:4], {})
            merged = heads_out.transpose(1, 2).reshape(1, 1, k)
            w_attrs = get_op("woq_linear").parse_attrs({"bits": 4, "group_size": 128})
            w_inputs = [merged, *inputs[4:]]
            separate = woq_linear.triton_woq_linear(context("woq_linear", w_attrs, w_inputs, range(1, 5))).fn(
                [merged, None, None, None, None], {})
            want = op.reference([t.float() if t is not None and t.is_floating_point() else t for t in inputs], attrs, {})
            top = want.abs().max()
            rows.append(((got.float() - want).abs().max() / top, (separate.float() - want).abs().max() / top,
                         (got.float() - separate.float()).abs().max() / top, (got != separate).float().mean()))
        t = torch.tensor([[float(v) for v in r] for r in rows])
        print(f"{keys} keys, {args.dtype}, {args.seeds} seeds: max relative error fused {t[:, 0].max():.2e}, "
              f"two kernels {t[:, 1].max():.2e}; fused vs two kernels max {t[:, 2].max():.2e}, "
              f"outputs differing {t[:, 3].mean() * 100:.2f} %", flush=True)


if __name__ == "__main__":
    main()
