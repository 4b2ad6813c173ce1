"""This CPU's peak multiply-accumulate rates, and how close each measured system comes to them.

    python benchmarks/peak.py                                            # the peaks
    python benchmarks/peak.py --results benchmarks/results/NAME.json     # + share of peak, target floors
    python benchmarks/peak.py --results R.json --out benchmarks/results/peak-NAME.md

Peaks: AVX-512 vfmadd231ps (fp32, 16 MACs), vdpbf16ps (bf16, 32) and vpdpbusd (int8, 64), or with
--isa avx2 (the default when IPEXCONVERT_MAX_ISA=avx2 or without AVX-512) AVX2 vfmadd231ps (fp32 and
bf16, which computes in fp32 there, 8 MACs) and vpmaddwd + vpaddd (int8's exact int16 path, 16; and for
comparison vpmaddubsw + vpmaddwd + vpaddd, 32, the u8 x s8 route exact only with 7-bit codes), in 12
independent chains at --threads threads, median of --rounds (peak/peak.cpp, compiled here with g++).
Work: the multiply-accumulates of the example model at the case's batch, counted by
torch.utils.flop_counter (flops / 2: convolutions, linears, matmuls and attention products).

A system's share of peak = MACs / median latency / the peak of its dtype. A target's floor =
(MACs / peak) / the baseline's median in that run: the ratio a system would reach running every
multiply-accumulate at the peak and nothing else. A target below its floor (needing more than 100%
of the peak) cannot be met on this CPU by any implementation doing the same products; only an
algorithm with fewer (Winograd convolution, for example) could. For int8 the floor counts every
product at the int8 peak, which only makes it lower (easier). Where the CPU has AMX (and IPEXCONVERT_MAX_ISA does
not cap below it), bf16 and int8 compute on its tiles: their peaks are then tdpbf16ps' and tdpbusd's, four
accumulator tiles with operands loaded once (the tiles' own rate; a GEMM also loads A and B tiles), and the AVX-512
rates are listed beside them.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
KERNELS = {  # dtype -> (function in peak.cpp, MACs per step, cpuinfo flag it needs, instruction)
    "fp32": ("fp32_fma", 16, "avx512f", "vfmadd231ps zmm"),
    "bf16": ("bf16_dot", 32, "avx512_bf16", "vdpbf16ps zmm"),
    "int8": ("int8_dot", 64, "avx512_vnni", "vpdpbusd zmm"),
}
# What a CPU without AVX-512 computes with (and what IPEXCONVERT_MAX_ISA=avx2 runs): bf16 is widened
# to fp32 there, and int8 is our exact int16 path (int8_gemm).
KERNELS_AVX2 = {
    "fp32": ("fp32_fma_avx2", 8, "avx2", "vfmadd231ps ymm"),
    "bf16": ("fp32_fma_avx2", 8, "avx2", "vfmadd231ps ymm (bf16 computes in fp32)"),
    "int8": ("int8_madd_avx2", 16, "avx2", "vpmaddwd + vpaddd ymm (int16 pairs)"),
    # Not what we run (no system's dtype): the ceiling of the other AVX2 int8 route, u8 x s8 pairs in int16, which is
    # exact only with 7-bit activations or weights (what ONNX Runtime's and OpenVINO's AVX2 int8 kernels use).
    "int8 7-bit": ("int8_maddubs_avx2", 32, "avx2", "vpmaddubsw + vpmaddwd (ones) + vpaddd ymm (7-bit codes)"),
}
# What bf16 and int8 compute with on an AMX CPU: 12 tile products a step (peak.cpp), MACs per product.
KERNELS_AMX = {
    "bf16": ("amx_bf16", 8192, "amx_bf16", "tdpbf16ps (AMX tiles, 16x16x32)"),
    "int8": ("amx_int8", 16384, "amx_int8", "tdpbusd (AMX tiles, 16x16x64)"),
}
CHAINS = 12


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def kernels_for(isa: str) -> dict:
    """The peak kernels of this build: dtype -> (function, MACs per step, flag, instruction)."""
    return KERNELS_AVX2 if isa == "avx2" else KERNELS


def build_library(isa: str) -> ctypes.CDLL:
    """peak.cpp as a shared library under benchmarks/.cache for `isa` (rebuilt when the source is newer): built with
    AVX2 flags alone for avx2, since with AVX-512 flags the compiler may use AVX-512 in the AVX2 functions too."""
    source = BENCH_DIR / "peak" / "peak.cpp"
    library = BENCH_DIR / ".cache" / f"peak-{isa}.so"
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        sys.exit("peak.py needs g++ (or c++) on PATH to build peak/peak.cpp")
    if not library.exists() or library.stat().st_mtime < source.stat().st_mtime:
        library.parent.mkdir(parents=True, exist_ok=True)
        flags = ["-O3", "-mavx2", "-mfma", "-fopenmp", "-shared", "-fPIC"]
        if isa == "avx512":
            flags += ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx512vnni", "-mavx512bf16"]
            amx = ["-mamx-tile", "-mamx-bf16", "-mamx-int8"]  # gcc 11+; without them the AMX functions are left out
            if subprocess.run([compiler, *flags, *amx, str(source), "-o", str(library)]).returncode == 0:
                return _bind(ctypes.CDLL(str(library)), isa)
        subprocess.run([compiler, *flags, str(source), "-o", str(library)], check=True)
    return _bind(ctypes.CDLL(str(library)), isa)


def _bind(lib: ctypes.CDLL, isa: str) -> ctypes.CDLL:
    names = [name for name, *_ in kernels_for(isa).values()]
    names += [name for name, *_ in KERNELS_AMX.values() if isa == "avx512" and hasattr(lib, name)]
    for name in names:
        getattr(lib, name).argtypes = [ctypes.c_long, ctypes.c_int]
        getattr(lib, name).restype = ctypes.c_float
    return lib


def amx_usable(lib: ctypes.CDLL, flags: set[str], isa: str) -> bool:
    """AMX peaks apply: the CPU has it, no cap below amx, the library has the tile functions, and Linux gave this
    process the tile state (the functions return a negative value when it refused)."""
    cap = os.environ.get("IPEXCONVERT_MAX_ISA", "").strip().lower()
    return (isa == "avx512" and cap in ("", "amx") and {"amx_tile", "amx_bf16", "amx_int8"} <= flags
            and all(hasattr(lib, name) for name, *_ in KERNELS_AMX.values()) and lib.amx_bf16(1, 1) >= 0)


def measure_peak(fn, macs_per_instruction: int, threads: int, rounds: int) -> float:
    """Median GMAC/s over `rounds` runs of ~0.2 s each."""
    iters = 1 << 16
    while True:  # size a run to ~0.2 s
        start = time.perf_counter()
        fn(iters, threads)
        if time.perf_counter() - start > 0.05:
            break
        iters *= 4
    iters = int(iters * 0.2 / max(time.perf_counter() - start, 1e-6))
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(iters, threads)
        seconds = time.perf_counter() - start
        rates.append(iters * CHAINS * macs_per_instruction * threads / seconds / 1e9)
    return statistics.median(rates)


def count_macs(model_name: str, batch: int) -> float:
    """Multiply-accumulates of one forward pass of the example model (flop counter flops / 2)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    sys.path.insert(0, str(BENCH_DIR.parent))
    from ipexconvert.examples import get_example

    example = get_example(model_name)
    model, inputs = example.build().eval(), example.example_inputs(batch)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(**inputs)
    return counter.get_total_flops() / 2


def results_tables(results: dict, peaks: dict[str, float]) -> list[str]:
    """Markdown: each system's share of its dtype's peak, then each target against its floor."""
    lines = ["", "## Share of peak per case and system", "",
             "| case | GMAC | system | median ms | GMAC/s | share of its dtype's peak |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    macs_of: dict[str, float] = {}
    medians: dict[tuple[str, str], float] = {}  # (case, system) -> median ms
    for case in results["cases"]:
        macs = macs_of[case["case"]] = count_macs(case["model"], case["batch"])
        for name, system in case.get("systems", {}).items():
            dtype, median = system.get("dtype"), system.get("median_ms")
            if median is None or dtype not in peaks:
                continue
            medians[(case["case"], name)] = median
            rate = macs / (median / 1e3) / 1e9
            lines.append(f"| {case['case']} | {macs / 1e9:.2f} | {name} | {median:.2f} | {rate:.0f} "
                         f"| {rate / peaks[dtype]:.0%} |")
    lines += ["", "## Targets against their floors", "",
              "Floor: the ratio reached running every multiply-accumulate at the peak of the target's dtype and "
              "nothing else. Needs: the share of that peak the whole run must average to meet the target "
              "(floor / target).", "",
              "| target | target ratio | floor | needs | measured | |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    baseline_of = {"fp32": "compile-fp32", "bf16": "compile-bf16", "int8": "compile-bf16"}
    for target in results.get("targets", []):
        base = medians.get((target["case"], baseline_of[target["dtype"]]))
        if base is None or target["dtype"] not in peaks:
            continue
        floor = macs_of[target["case"]] / 1e9 / peaks[target["dtype"]] * 1e3 / base
        needs = floor / target["max_ratio"]
        verdict = ("not reachable with the same products" if needs > 1.0 else
                   "at the peak: only in theory" if needs > 0.95 else "reachable in principle")
        measured = f"{target['ratio']:.3f}" if target.get("ratio") is not None else "-"
        lines.append(f"| {target['label']} | {target['max_ratio']:.2f} | {floor:.3f} | {needs:.0%} | {measured} "
                     f"| {verdict} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--results", type=Path, help="a benchmarks/run.py JSON to compare with the peaks")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    parser.add_argument("--isa", choices=["auto", "avx2", "avx512"], default="auto",
                        help="which instructions set the peaks (auto: avx2 when IPEXCONVERT_MAX_ISA=avx2 or the CPU "
                             "has no AVX-512)")
    args = parser.parse_args()

    flags = cpu_flags()
    isa = args.isa
    if isa == "auto":
        capped = os.environ.get("IPEXCONVERT_MAX_ISA", "").strip().lower() in ("avx2", "generic")
        isa = "avx2" if capped or "avx512f" not in flags else "avx512"
    kernels = kernels_for(isa)
    lib = build_library(isa)
    # AMX's table comes last: where it runs, its rates replace AVX-512's as the peaks bf16 and int8 are judged by
    amx = amx_usable(lib, flags, isa)
    tables = [kernels, KERNELS_AMX] if amx else [kernels]
    peaks, judged_by, measured = {}, {}, []  # dtype -> peak, dtype -> its instruction; (dtype, instruction, rate) rows
    for table in tables:
        for dtype, (name, macs, flag, instruction) in table.items():
            if flag in flags:
                peaks[dtype] = measure_peak(getattr(lib, name), macs, args.threads, args.rounds)
                judged_by[dtype] = instruction
                measured.append((dtype, instruction, peaks[dtype]))
    lines = [f"# Peak multiply-accumulate rates, {args.threads} threads", "",
             f"Command: `python {' '.join(['benchmarks/peak.py', *sys.argv[1:]])}`", "",
             "| dtype | instruction | GMAC/s | per thread |", "| --- | --- | ---: | ---: |"]
    for dtype, instruction, rate in measured:
        lines.append(f"| {dtype} | {instruction} | {rate:.0f} | {rate / args.threads:.0f} |")
    lines += ["", "Shares and floors below judge " + ", ".join(f"{d} by {i}" for d, i in judged_by.items()) + "."]
    if "amx_tile" in flags and isa != "avx2" and not amx:
        lines += ["", "This CPU has AMX, but its tiles were not measured (capped, or no compiler or kernel support): "
                  "bf16 and int8 floors would be far lower."]
    if args.results:
        results = json.loads(args.results.read_text())
        lines += ["", f"Results: `{args.results}` ({results.get('command', '')}); the latencies and ratios are "
                  "from that run, the peaks from this one."]
        lines += results_tables(results, peaks)
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
