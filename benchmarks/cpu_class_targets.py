"""The every-CPU-class targets, read from one benchmarks/run.py JSON (no timing here).

    python benchmarks/cpu_class_targets.py benchmarks/results/NAME.json [--out benchmarks/results/NAME-targets.md]

Per case and dtype: our artifact against the best peer of that dtype in the same run (torch.compile
+ freezing, OpenVINO, ONNX Runtime; on a CPU without bf16 arithmetic a bf16 artifact is compared
with the best fp32 peer, since that is what a user there would run instead), bf16 against our fp32
artifact, and int8 against our fp32 artifact (target 0.70 on AVX2, 0.55 with VNNI/AMX).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ipexconvert.backends.cpu import compute_precision
from ipexconvert.backends.cpu.isa import ISA_LEVELS

PEERS = {"fp32": ("compile-fp32", "openvino-fp32", "onnxruntime-fp32"),
         "bf16": ("compile-bf16", "openvino-bf16"),
         "int8": ("openvino-int8", "onnxruntime-int8")}


def median(case: dict, system: str) -> float | None:
    entry = case["systems"].get(system) or {}
    return None if entry.get("error") or entry.get("unavailable") else entry.get("median_ms")


def best_peer(case: dict, dtype: str) -> tuple[str, float] | None:
    found = [(name, median(case, name)) for name in PEERS[dtype]]
    found = [(name, ms) for name, ms in found if ms is not None]
    return min(found, key=lambda item: item[1]) if found else None


def verdict(ratio: float | None, target: float) -> str:
    return "–" if ratio is None else f"{ratio:.3f} ({'met' if ratio <= target else 'not met'}, ≤ {target:.2f})"


def report(results: dict) -> list[str]:
    level = results["machine"].get("ipexconvert_selected_isa", "generic")
    bf16_native = compute_precision.bf16_compute_dtype(level) == "bfloat16"
    int8_target = 0.55 if ISA_LEVELS.index(level) >= ISA_LEVELS.index("avx512_vnni") else 0.70
    lines = [f"# Every-CPU-class targets: `{results['name']}`", "",
             f"From `{results['command']}` (git {(results.get('git') or {}).get('commit', '?')[:7]}); "
             f"ipexconvert ran at level `{level}`; bf16 {'computes in bf16' if bf16_native else 'computes in fp32 (no bf16 arithmetic at this level): compared with the best fp32 peer'}.",
             "Peers choose their own kernels: under IPEXCONVERT_MAX_ISA they still run this CPU's best ISA, so a "
             "capped run's peer ratios are not those of a real CPU of the capped class.",
             "", "| case | dtype | ours ms | best peer | peer ms | ours / best peer (≤ 0.90) | vs our fp32 |",
             "| --- | --- | ---: | --- | ---: | --- | --- |"]
    for case in results["cases"]:
        ours_fp32 = median(case, "ipexconvert-fp32")
        for dtype in ("fp32", "bf16", "int8"):
            ours = median(case, f"ipexconvert-{dtype}")
            if ours is None:
                continue
            peer = best_peer(case, "fp32" if dtype == "bf16" and not bf16_native else dtype)
            peer_name, peer_ms = peer if peer else ("–", None)
            to_peer = verdict(ours / peer_ms if peer_ms else None, 0.90)
            against_fp32 = ("–" if dtype == "fp32" or ours_fp32 is None else
                            verdict(ours / ours_fp32, 1.0 if dtype == "bf16" else int8_target))
            lines.append(f"| {case['case']} | {dtype} | {ours:.2f} | {peer_name} | "
                         f"{'–' if peer_ms is None else f'{peer_ms:.2f}'} | {to_peer} | {against_fp32} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = "\n".join(report(json.loads(args.results.read_text()))) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
