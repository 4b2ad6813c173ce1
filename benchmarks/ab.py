"""Same-process A/B of one artifact against a variant of itself: interleaved rounds, medians.

    python benchmarks/ab.py ART.ipxc --env IPEXCONVERT_ONEDNN_DIRECT           # loaded with VAR=1 vs VAR=0
    python benchmarks/ab.py ART.ipxc --env IPEXCONVERT_AMX_GEMM=always         # loaded with VAR=always vs VAR=0
    python benchmarks/ab.py ART.ipxc --env IPEXCONVERT_AMX_GEMM=always:1       # VAR=always vs VAR=1
    python benchmarks/ab.py ART.ipxc --env IPEXCONVERT_AMX_GEMM --per-node 20  # + the 20 nodes that differ most
    python benchmarks/ab.py ART.ipxc --without onednn_direct_qlinear            # kernel factory removed in B
    python benchmarks/ab.py ART.ipxc --no-in-place                     # the executor's in-place variants off in B
    python benchmarks/ab.py ART.ipxc --no-view-chains                  # every view node its own step in B
    python benchmarks/ab.py ART.ipxc --no-dims-cache                   # B runs dims-only nodes on every call
    python benchmarks/ab.py ART.ipxc --no-native-gelu-tail             # B: linears' GELU fused by oneDNN / torch's
    python benchmarks/ab.py ART.ipxc --gelu-unfused-everywhere         # B: linears' GELU never fused, native tail
    python benchmarks/ab.py ART.ipxc --lowering convolution --dim batch=16   # direct convs never as matmuls in B
    python benchmarks/ab.py ART.ipxc --no-conv-shape-choice            # B: convs never folded / side by side
    python benchmarks/ab.py ART.ipxc --vs OTHER.ipxc --dim batch=16    # two artifacts, same inputs
    python benchmarks/ab.py NEW.ipxc --vs OLD.ipxc --without FACTORY   # OTHER loaded under a change too

Both models are loaded in one process before any timing, checked against each other on the stored
example inputs (resized with --dim), then timed in alternating order. Machine noise moves single
runs by 5-10% at batch 1: repeat, and trust only differences larger than that.

--per-node N then times every step of both where the model runs it (its inputs as the steps before left them, its
weights as cold as they are there), again in alternating rounds, and prints the N nodes whose medians differ most:
a kernel timed alone, on hot inputs and a reused output, can rank two kernels the other way round (session 67:
ResNet-50's 1x1 layers on our AMX tile GEMM, 0.45-0.85 x oneDNN's time alone, 1.6-2.8 x in the model at 56 x 56).
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
from ipexconvert.backends.cpu.kernels import _onednn_direct_conv, _torch_onednn  # noqa: E402
import ipexconvert.runtime.executor as executor_module  # noqa: E402
from ipexconvert.artifact import read_example_inputs  # noqa: E402
from ipexconvert.bench import resize_inputs, time_interleaved  # noqa: E402
from ipexconvert.runtime import kernels  # noqa: E402
from ipexconvert.runtime.kernels import CHOOSING_CALLS  # noqa: E402
from timing import step_timers  # noqa: E402  (benchmarks/, the script's folder)


def load_variant(path: str, args) -> object:
    """B: the artifact under the change the options ask for."""
    path = args.vs or path
    if args.env:
        variable, value, b_value = env_setting(args.env)
        os.environ[variable] = b_value
        try:
            return ipexconvert.load_artifact(path)
        finally:
            os.environ[variable] = value
    saved_resolve, saved = executor_module.resolve_kernel, {k: list(v) for k, v in kernels.KERNELS.items()}
    saved_find_chains, saved_dims_only = executor_module.find_chains, executor_module._dims_only_values
    saved_conv = dnnl.raw.Conv if dnnl.raw is not None else None
    saved_tail, saved_unfused = _torch_onednn.NATIVE_TAIL, _torch_onednn.GELU_UNFUSED_AT
    saved_shape_choice = _onednn_direct_conv.shape_choice
    try:
        if args.no_conv_shape_choice:
            _onednn_direct_conv.shape_choice = lambda *_: None
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
        _onednn_direct_conv.shape_choice = saved_shape_choice


def env_setting(option: str) -> tuple[str, str, str]:
    """--env VAR, VAR=VALUE or VAR=VALUE:B_VALUE: the variable, A's value (1 unless given) and B's (0 unless given)."""
    variable, _, values = option.partition("=")
    value, _, b_value = values.partition(":")
    return variable, value or "1", b_value or "0"


def time_per_node(models: dict, inputs: dict, rounds: int) -> dict[str, dict[str, float]]:
    """Median seconds of each step of each model, timed where the model runs it, in alternating rounds."""
    samples = {side: step_timers(model) for side, model in models.items()}
    for r in range(rounds):
        for side in (list(models) if r % 2 == 0 else list(models)[::-1]):
            models[side].run_dict(inputs)
    return {side: {node: statistics.median(t) for node, t in nodes.items() if t} for side, nodes in samples.items()}


def print_per_node(a, b, inputs: dict, rounds: int, top: int) -> None:
    medians = time_per_node({"A": a, "B": b}, inputs, rounds)
    names = {side: {s.node: s.kernel_name for s in m.executor.steps} for side, m in (("A", a), ("B", b))}
    common = [n for n in medians["A"] if n in medians["B"]]
    common.sort(key=lambda n: -abs(medians["A"][n] - medians["B"][n]))
    print(f"per node ({rounds} alternating rounds; A ms, B ms, A/B; kernels where they differ):")
    for node in common[:top]:
        ta, tb = medians["A"][node] * 1e3, medians["B"][node] * 1e3
        kernels = "" if names["A"][node] == names["B"][node] else f"  {names['A'][node]} | {names['B'][node]}"
        print(f"  {node:<24} {ta:8.3f} {tb:8.3f} {ta / tb:6.2f}{kernels}")
    for side, other in (("A", "B"), ("B", "A")):
        alone = {n: t for n, t in medians[side].items() if n not in medians[other]}
        if alone:
            listed = ", ".join(f"{n} {t * 1e3:.3f}" for n, t in sorted(alone.items(), key=lambda kv: -kv[1])[:top])
            print(f"  only in {side}: {sum(alone.values()) * 1e3:.3f} ms ({listed})")
    print(f"  sum of steps: A {sum(medians['A'].values()) * 1e3:.2f} ms, B {sum(medians['B'].values()) * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    change = parser.add_mutually_exclusive_group()
    change.add_argument("--env", help="environment variable VAR, VAR=VALUE or VAR=VALUE:B_VALUE: A loads with it 1 "
                                      "(or VALUE), B with it 0 (or B_VALUE)")
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
    change.add_argument("--no-conv-shape-choice", action="store_true",
                        help="B's direct oneDNN convs run their input as it is, never measuring it folded into more "
                             "images or side by side (_onednn_direct_conv.shape_choice)")
    parser.add_argument("--vs", help="B is this other artifact (loaded under the change given, if any)")
    parser.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a dynamic dim")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--per-node", type=int, default=0, metavar="N",
                        help="then time each step where the model runs it and print the N nodes that differ most")
    args = parser.parse_args()
    if not (args.vs or args.env or args.without or args.no_in_place or args.no_view_chains or args.no_dims_cache
            or args.no_native_gelu_tail or args.gelu_unfused_everywhere
            or args.lowering or args.no_conv_shape_choice):
        parser.error("give B a change (--env, --without, --no-in-place, --no-view-chains, --no-dims-cache, "
                     "--no-native-gelu-tail, --gelu-unfused-everywhere, --lowering, --no-conv-shape-choice) or another "
                     "artifact (--vs)")
    torch.set_num_threads(args.threads)
    if args.env:
        os.environ.__setitem__(*env_setting(args.env)[:2])
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
    samples = time_interleaved({"A": lambda: a.run_dict(inputs), "B": lambda: b.run_dict(inputs)},
                               warmup=CHOOSING_CALLS,
                               rounds=args.rounds)
    ms_a, ms_b = (statistics.median(samples[k]) * 1e3 for k in "AB")
    print(f"{Path(args.artifact).name} {sizes or ''}: A {ms_a:.2f} ms, B {ms_b:.2f} ms, A/B {ms_a / ms_b:.3f} "
          f"({args.rounds} interleaved rounds, {args.threads} threads)")
    if args.per_node:
        print_per_node(a, b, inputs, args.rounds, args.per_node)


if __name__ == "__main__":
    main()
