"""Same-process A/B of one artifact against a variant of itself: interleaved rounds, medians.

    python benchmarks/ab.py ART.ipxc --env IPEXCONVERT_ONEDNN_DIRECT           # loaded with VAR=1 vs VAR=0
    python benchmarks/ab.py ART.ipxc --without onednn_direct_qlinear            # kernel factory removed in B
    python benchmarks/ab.py ART.ipxc --no-in-place                     # the executor's in-place variants off in B
    python benchmarks/ab.py ART.ipxc --no-view-chains                  # every view node its own step in B
    python benchmarks/ab.py ART.ipxc --no-dims-cache                   # B runs dims-only nodes on every call
    python benchmarks/ab.py ART.ipxc --no-native-gelu-tail             # B: linears' GELU fused by oneDNN / torch's
    python benchmarks/ab.py ART.ipxc --gelu-unfused-everywhere         # B: linears' GELU never fused, native tail
    python benchmarks/ab.py ART.ipxc --lowering convolution --dim batch=16   # direct convs never as matmuls in B
    python benchmarks/ab.py ART.ipxc --vs OTHER.ipxc --dim batch=16    # two artifacts, same inputs
    python benchmarks/ab.py NEW.ipxc --vs OLD.ipxc --without FACTORY   # OTHER loaded under a change too

Both models are loaded in one process before any timing, checked against each other on the stored
example inputs (resized with --dim), then timed in alternating order. Machine noise moves single
runs by 5-10% at batch 1: repeat, and trust only differences larger than that.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ipexconvert  # noqa: E402
from ipexconvert.backends.cpu import onednn_direct as dnnl  # noqa: E402
from ipexconvert.backends.cpu.kernels import _torch_onednn  # noqa: E402
import ipexconvert.runtime.executor as executor_module  # noqa: E402
from ipexconvert.artifact import read_example_inputs  # noqa: E402
from ipexconvert.bench import resize_inputs, time_interleaved  # noqa: E402
from ipexconvert.runtime import kernels  # noqa: E402


def load_variant(path: str, args) -> object:
    """B: the artifact under the change the options ask for."""
    path = args.vs or path
    if args.env:
        os.environ[args.env] = "0"
        try:
            return ipexconvert.load_artifact(path)
        finally:
            os.environ[args.env] = "1"
    saved_resolve, saved = executor_module.resolve_kernel, {k: list(v) for k, v in kernels.KERNELS.items()}
    saved_find_chains, saved_dims_only = executor_module.find_chains, executor_module._dims_only_values
    saved_conv = dnnl.raw.Conv if dnnl.raw is not None else None
    saved_tail, saved_unfused = _torch_onednn.NATIVE_TAIL, _torch_onednn.GELU_UNFUSED_AT
    try:
        if args.gelu_unfused_everywhere:
            _torch_onednn.GELU_UNFUSED_AT = frozenset(_torch_onednn.ISA_LEVELS)
        if args.no_native_gelu_tail:
            _torch_onednn.NATIVE_TAIL = {}
        if args.lowering:
            dnnl.raw.Conv = functools.partial(saved_conv, lowering=args.lowering)
        if args.without:
            for factories in kernels.KERNELS.values():
                factories[:] = [f for f in factories if f.__name__ not in args.without]
        if args.no_in_place:
            executor_module.resolve_kernel = lambda ctx: dataclasses.replace(saved_resolve(ctx), in_place=None)
        if args.no_view_chains:
            executor_module.find_chains = lambda *_: {}
        if args.no_dims_cache:
            executor_module._dims_only_values = lambda graph: set()
        return ipexconvert.load_artifact(path)
    finally:
        executor_module.resolve_kernel = saved_resolve
        executor_module.find_chains, executor_module._dims_only_values = saved_find_chains, saved_dims_only
        kernels.KERNELS.update(saved)
        if saved_conv is not None:
            dnnl.raw.Conv = saved_conv
        _torch_onednn.NATIVE_TAIL, _torch_onednn.GELU_UNFUSED_AT = saved_tail, saved_unfused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    change = parser.add_mutually_exclusive_group()
    change.add_argument("--env", help="environment variable: A loads with it 1, B with it 0")
    change.add_argument("--without", action="append", help="kernel factory function name left out in B (repeatable)")
    change.add_argument("--no-in-place", action="store_true", help="B never runs a kernel's in-place variant")
    change.add_argument("--no-view-chains", action="store_true", help="B runs every view node as its own step")
    change.add_argument("--no-native-gelu-tail", action="store_true",
                        help="B: a linear's GELU fused into oneDNN's call (or run by torch after MKL's), no native "
                             "GELU in place after the call")
    change.add_argument("--gelu-unfused-everywhere", action="store_true",
                        help="B: a linear's GELU is never handed to oneDNN at any level (GELU_UNFUSED_AT), it runs as "
                             "our native GELU in place after the call")
    change.add_argument("--no-dims-cache", action="store_true",
                        help="B runs the nodes computed from constants and dims alone on every call")
    change.add_argument("--lowering", choices=["auto", "matmul", "convolution"],
                        help="whether B's direct oneDNN convs run as matmuls (native/dnnl/conv.cpp; A: auto)")
    parser.add_argument("--vs", help="B is this other artifact (loaded under the change given, if any)")
    parser.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a dynamic dim")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not (args.vs or args.env or args.without or args.no_in_place or args.no_view_chains or args.no_dims_cache
            or args.no_native_gelu_tail or args.gelu_unfused_everywhere
            or args.lowering):
        parser.error("give B a change (--env, --without, --no-in-place, --no-view-chains, --no-dims-cache, "
                     "--no-native-gelu-tail, --gelu-unfused-everywhere, --lowering) or another artifact (--vs)")
    torch.set_num_threads(args.threads)
    if args.env:
        os.environ[args.env] = "1"
    a = ipexconvert.load_artifact(args.artifact)
    b = load_variant(args.artifact, args)
    sizes = {k: int(v) for k, v in (d.split("=") for d in args.dim)}
    inputs = resize_inputs(read_example_inputs(args.artifact), a, sizes)
    kernels_a = {s.kernel_name for s in a.executor.steps}
    kernels_b = {s.kernel_name for s in b.executor.steps}
    print(f"kernels only in A: {sorted(kernels_a - kernels_b)}; only in B: {sorted(kernels_b - kernels_a)}")
    print(f"in-place steps: A {sum(s.in_place for s in a.executor.steps)}, B {sum(s.in_place for s in b.executor.steps)}")
    out_a, out_b = a.run_dict(inputs), b.run_dict(inputs)
    for name in out_a:
        x, y = out_a[name].float().flatten(), out_b[name].float().flatten()
        print(f"{name}: cosine A/B {torch.nn.functional.cosine_similarity(x, y, dim=0).item():.6f}")
    samples = time_interleaved({"A": lambda: a.run_dict(inputs), "B": lambda: b.run_dict(inputs)}, warmup=3,
                               rounds=args.rounds)
    ms_a, ms_b = (statistics.median(samples[k]) * 1e3 for k in "AB")
    print(f"{Path(args.artifact).name} {sizes or ''}: A {ms_a:.2f} ms, B {ms_b:.2f} ms, A/B {ms_a / ms_b:.3f} "
          f"({args.rounds} interleaved rounds, {args.threads} threads)")


if __name__ == "__main__":
    main()
