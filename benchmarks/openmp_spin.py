"""How the OpenMP wait policy changes an artifact's latency on a quiet and on a shared host.

Each (spin setting, round) loads the artifact in a fresh process (libgomp reads its settings once,
when it loads) and reports the median of N calls; rounds interleave the settings; --background-load
runs busy processes the whole time. Example (the numbers in benchmarks/results/contention.md):

    .venv/bin/python benchmarks/openmp_spin.py benchmarks/.cache/resnet50.fp32.*.ipxc --loads 0 1 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = """
import sys, time, statistics
import ipexconvert, torch
from ipexconvert.artifact import read_example_inputs
model = ipexconvert.load_artifact(sys.argv[1])
inputs = read_example_inputs(sys.argv[1])
for _ in range(3):
    model.run_dict(inputs)
samples = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter(); model.run_dict(inputs); samples.append(time.perf_counter() - start)
print(statistics.median(samples) * 1000, ipexconvert.backends.cpu.openmp_wait.state)
"""

SETTINGS = {
    "libgomp default (300000)": {"GOMP_SPINCOUNT": "300000"},
    "ipexconvert (30000)": {},
    "10000": {"GOMP_SPINCOUNT": "10000"},
    "3000": {"GOMP_SPINCOUNT": "3000"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact")
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 2], help="busy background processes per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--spins", type=int, nargs="*", default=[], help="more GOMP_SPINCOUNT values to try")
    args = parser.parse_args()
    settings = {**SETTINGS, **{str(n): {"GOMP_SPINCOUNT": str(n)} for n in args.spins}}
    base_env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    print(f"artifact {args.artifact}; {args.calls} calls per process, median; {args.rounds} interleaved rounds;"
          f" IPEXCONVERT_MAX_ISA={os.environ.get('IPEXCONVERT_MAX_ISA', 'unset')}")
    for load in args.loads:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
        results: dict[str, list[float]] = {name: [] for name in settings}
        try:
            time.sleep(0.5)
            for _ in range(args.rounds):
                for name, extra in settings.items():
                    done = subprocess.run([sys.executable, "-c", CHILD, args.artifact, str(args.calls)],
                                          env={**base_env, **extra}, capture_output=True, text=True, check=True)
                    results[name].append(float(done.stdout.split()[0]))
        finally:
            for process in busy:
                process.kill()
        print(f"\nbackground load {load}: | spin | median of rounds ms | rounds ms |")
        for name, values in results.items():
            print(f"| {name} | {statistics.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} |")


if __name__ == "__main__":
    main()
