"""GELU after a linear layer: fused into oneDNN's matmul as a post-op, or run after it by torch or by our native
kernel in place, at the transformer shapes of benchmarks/run.py (interleaved rounds in one process, medians).

    python benchmarks/gelu_post_op.py [--threads 2] [--rounds 7] [--dtypes float32,bfloat16]

Per shape and dtype: the linear alone, with oneDNN's fused erf GELU, with torch's GELU after it, with our native
GELU in place after it; float32 also through MKL's packed sgemm (the float32 linear on Intel CPUs) followed by torch's
or our GELU. What the loader should do with a linear's GELU at this CPU's level is the fastest of these
(ipexconvert/backends/cpu/kernels/_torch_onednn.py, GELU_UNFUSED_AT). bfloat16 runs only where the level computes
it natively (avx512_bf16, amx).
"""
from __future__ import annotations

import argparse

import torch

from ipexconvert.backends.cpu import native_lib
from timing import interleaved_us  # benchmarks/ is on sys.path as the script's folder

SHAPES = [(4096, 384, 1536, "MiniLM b32 FFN up"), (128, 768, 3072, "BERT-base b1 FFN up"),
          (1024, 768, 3072, "BERT-base b8 FFN up")]  # rows, in, out


def variants(m: int, k: int, n: int, dtype: torch.dtype, level: str, threads: int) -> dict:
    lib = native_lib.raw
    g = torch.Generator().manual_seed(m + k + n)
    x = torch.randn(m, k, generator=g).to(dtype)
    w = (torch.randn(n, k, generator=g) * k ** -0.5).to(dtype)
    b = torch.randn(n, generator=g).to(dtype)
    packed = torch.ops.mkldnn._reorder_linear_weight(w, None)

    def onednn(attr: str = "none", algorithm: str = ""):
        return torch.ops.mkldnn._linear_pointwise(x, packed, b, attr, [], algorithm)

    def native_after(y: torch.Tensor) -> torch.Tensor:
        lib.gelu(y, False, y, level, threads)
        return y

    out = {"linear alone (oneDNN)": onednn,
           "oneDNN + fused erf GELU": lambda: onednn("gelu", "none"),
           "oneDNN, then torch GELU": lambda: torch.nn.functional.gelu(onednn()),
           "oneDNN, then native GELU in place": lambda: native_after(onednn())}
    if dtype == torch.float32 and hasattr(torch.ops.mkl, "_mkl_linear"):
        mkl = torch.ops.mkl._mkl_reorder_linear_weight(w, m)
        out["MKL, then torch GELU"] = lambda: torch.nn.functional.gelu(torch.ops.mkl._mkl_linear(x, mkl, w, b, m))
        out["MKL, then native GELU in place"] = lambda: native_after(torch.ops.mkl._mkl_linear(x, mkl, w, b, m))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    level = native_lib.selected_level()
    print(f"level {level}, {args.threads} threads, torch {torch.__version__}, {args.rounds} interleaved rounds, medians")
    print("| shape | dtype | variant | ms | vs fused |")
    print("|---|---|---|---:|---:|")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        if dtype == torch.bfloat16 and level not in ("avx512_bf16", "amx"):
            continue
        with torch.no_grad():
            for m, k, n, name in SHAPES:
                us = interleaved_us(variants(m, k, n, dtype, level, args.threads), args.rounds, calls=3)
                fused = us["oneDNN + fused erf GELU"]
                for variant, t in us.items():
                    print(f"| {name} ({m}x{k}x{n}) | {dtype_name} | {variant} | {t / 1e3:.2f} | {t / fused:.2f} |")


if __name__ == "__main__":
    main()
