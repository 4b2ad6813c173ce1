"""Symmetric weight-only layers packed with their scales alone (one qparams plane, the kernel taking the symmetric
zero point) against the same layers packed with an explicit plane of zero points (the layout before session 42):
one decoder artifact loaded twice in one process, decode steps of the two in interleaved rounds (generate()'s bound
steps after a random prompt), and the step's weight-only GEMVs alone, whose outputs are checked bit-identical first.

    python benchmarks/woq_qparam_planes.py model.ipxc [--prompt 512] [--rounds 15] [--threads 2]
"""
from __future__ import annotations

import statistics

import torch

from ipexconvert.api import load_artifact
from ipexconvert.backends.cpu.kernels import woq_linear
from ipexconvert.decoder_bench import read_bandwidth_gbs
from ipexconvert.ir.ops.woq_linear import SYMMETRIC_INT4_ZERO

from decode_profile import after_prompt  # benchmarks/ is on the path when run as a script
from decode_step_costs import capture_gemvs, gemv_sweep, median_ms, step_arguments, step_with, timed


def load_with_zero_plane(path: str):
    """The artifact loaded with every symmetric layer's qparams given a plane of its symmetric zero points."""
    pack = woq_linear.pack_woq_weight

    def two_planes(codes, scales, zero_points, bits, group_size, integer_layout=False):
        if zero_points is None:  # the symmetric zero point written out, as an asymmetric layer's are
            zero_points = torch.full(scales.shape, SYMMETRIC_INT4_ZERO if bits == 4 else 0, dtype=torch.uint8)
        return pack(codes, scales, zero_points, bits, group_size, integer_layout)

    woq_linear.pack_woq_weight = two_planes
    try:
        return load_artifact(path)
    finally:
        woq_linear.pack_woq_weight = pack


def main() -> None:
    args = step_arguments(__doc__)
    models = {"scales alone": load_artifact(args.artifact), "zero-point plane": load_with_zero_plane(args.artifact)}
    states = {name: after_prompt(model, args.prompt) for name, model in models.items()}
    gemvs = {name: capture_gemvs(*state) for name, state in states.items()}
    planes = {name: {layer.qparams.shape[2] for layer, _, _ in calls} for name, calls in gemvs.items()}
    sweeps, outs = zip(*(gemv_sweep(calls, args.threads) for calls in gemvs.values()))
    for sweep in sweeps:
        sweep()
    if not all(torch.equal(a, b) for a, b in zip(*outs)):
        raise SystemExit("the two layouts' GEMVs disagree: not comparable")
    results: dict[str, list[float]] = {f"{kind} {name}": [] for kind in ("step", "GEMVs") for name in models}
    for _ in range(args.rounds):
        for (name, (cache, step)), sweep in zip(states.items(), sweeps):
            results[f"step {name}"].append(timed(step_with(cache, step, bound=True), 4))
            results[f"GEMVs {name}"].append(timed(sweep, 2))
    bandwidth = read_bandwidth_gbs()
    byte_counts = {name: sum(layer.packed.numel() * layer.packed.element_size() + layer.qparams.numel() * 4
                             for layer, _, _ in calls) for name, calls in gemvs.items()}
    print(f"{args.artifact}: {len(gemvs['scales alone'])} GEMVs, ~{args.prompt} cached positions, {args.threads} "
          f"threads, {args.rounds} interleaved rounds; read bandwidth {bandwidth:.1f} GB/s; qparams planes {planes}")
    print("| layout | packed MB a step | bound step ms | GEMVs alone ms | GEMVs' share of the read bandwidth |")
    print("|---|---:|---:|---:|---:|")
    for name in models:
        gemv = median_ms(results[f"GEMVs {name}"])
        print(f"| {name} | {byte_counts[name] / 1e6:.1f} | {median_ms(results[f'step {name}']):.2f} | {gemv:.2f} | "
              f"{byte_counts[name] / 1e6 / gemv / bandwidth:.2f} |")
    names = list(models)
    for kind in ("step", "GEMVs"):
        ratio = statistics.median(x / y for x, y in zip(results[f"{kind} {names[0]}"], results[f"{kind} {names[1]}"]))
        print(f"{kind}: {names[0]} / {names[1]} = {ratio:.3f} (median of the rounds' ratios)")


if __name__ == "__main__":
    main()
