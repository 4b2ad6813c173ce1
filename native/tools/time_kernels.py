"""Brief timing: each op's native runtime kernel vs its torch reference, as the executor calls them.

usage: python native/tools/time_kernels.py [--rows 1024] [--cols 768] [--threads N] [--reps 50]
Prints the best-of-rounds time per call (us) and native/torch. A sanity check, not a benchmark:
on a shared machine expect +-20% noise.
"""
from __future__ import annotations

import argparse
import time

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "native"))
import native_ops as native  # noqa: E402  (the torch harness over the native kernels)
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.runtime.kernels import NodeContext
from ipexconvert.backends.cpu.kernels import add_layer_norm, gelu, layer_norm, rms_norm, silu, softmax

FACTORIES = {
    "layer_norm": layer_norm.native_layer_norm, "add_layer_norm": add_layer_norm.native_add_layer_norm,
    "rms_norm": rms_norm.native_rms_norm, "softmax": softmax.native_softmax, "gelu": gelu.native_gelu,
    "gelu_tanh": gelu.native_gelu, "silu": silu.native_silu,
}


def case(op: str, rows: int, cols: int, dtype: torch.dtype):
    """(op name, attrs, inputs, constants) for one op on [rows, cols]."""
    x = torch.randn(rows, cols).to(dtype)
    w, b = torch.randn(cols), torch.randn(cols)
    if op == "layer_norm":
        return op, {"normalized_shape": [cols], "eps": 1e-5}, [x, w, b], (None, w, b)
    if op == "add_layer_norm":
        r = torch.randn(rows, cols).to(dtype)
        return op, {"normalized_shape": [cols], "eps": 1e-5}, [x, r, w, b], (None, None, w, b)
    if op == "rms_norm":
        return op, {"normalized_shape": [cols], "eps": 1e-6}, [x, w], (None, w)
    if op == "softmax":
        return op, {"dim": -1}, [x], (None,)
    if op == "gelu_tanh":
        return "gelu", {"approximate": "tanh"}, [x], (None,)
    return op, {}, [x], (None,)


def best_us(fn, reps: int, rounds: int = 5) -> float:
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - start) / reps)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=768)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    isa = selected_isa()
    print(f"[{args.rows}, {args.cols}], {torch.get_num_threads()} threads, ISA {isa}, torch {torch.__version__}")
    print(f"{'op':<16}{'dtype':<10}{'native us':>10}{'torch us':>10}{'ratio':>8}")
    torch.manual_seed(0)
    with torch.inference_mode():
        for dtype in (torch.float32, torch.bfloat16):
            for name, factory in FACTORIES.items():
                op, attrs_dict, inputs, constants = case(name, args.rows, args.cols, dtype)
                attrs = get_op(op).parse_attrs(attrs_dict)
                specs = tuple(None if t is None else TensorSpec.of(t) for t in inputs)
                ctx = NodeContext(op=op, attrs=attrs, constants=constants, input_specs=specs,
                                  output_specs=(specs[0],), device="cpu", isa=isa)
                kernel = factory(ctx)
                feed = [None if i in kernel.consumed_inputs else t for i, t in enumerate(inputs)]
                reference = get_op(op).compile(attrs)
                t_native = best_us(lambda: kernel.fn(feed, {}), args.reps)
                t_torch = best_us(lambda: reference(inputs, {}), args.reps)
                print(f"{name:<16}{str(dtype).replace('torch.', ''):<10}{t_native:>10.1f}{t_torch:>10.1f}"
                      f"{t_native / t_torch:>8.2f}")


if __name__ == "__main__":
    main()
