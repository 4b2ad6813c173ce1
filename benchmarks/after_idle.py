"""A call after an idle spell against calls back to back, with the threads placed for the call (the default,
backends/cpu/thread_placement.py) and left where the scheduler puts them (IPEXCONVERT_PIN_THREADS=0).

    python benchmarks/after_idle.py ART.ipxc [ART2.ipxc ...] [--idle-ms 100] [--pairs 2] [--calls 15]

Placement is a process's state (worker threads bound once), so each setting runs in fresh processes, the two
alternating --pairs times; a process makes --calls calls each after --idle-ms of sleep and, after each, three calls
back to back. Printed per artifact and setting: the medians of every process's medians.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, statistics, sys, time
import ipexconvert  # first: the OpenMP spin count ipexconvert sets applies
import torch
from ipexconvert.artifact import read_example_inputs
path, idle, calls = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
model = ipexconvert.load_artifact(path)
inputs = read_example_inputs(path)
for _ in range(20):
    model.run_dict(inputs)
after, back = [], []
for _ in range(calls):
    time.sleep(idle)
    start = time.perf_counter(); model.run_dict(inputs); after.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(3):
        model.run_dict(inputs)
    back.append((time.perf_counter() - start) / 3)
print(json.dumps({"after_idle_ms": statistics.median(after) * 1e3, "back_to_back_ms": statistics.median(back) * 1e3,
                  "threads": torch.get_num_threads()}))
"""

SETTINGS = {"placed (default)": "1", "as scheduled (IPEXCONVERT_PIN_THREADS=0)": "0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", nargs="+", type=Path)
    parser.add_argument("--idle-ms", type=float, default=100.0)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    print(f"| artifact | threads | after {args.idle_ms:g} ms idle, ms | back to back, ms |")
    print("| --- | --- | ---: | ---: |")
    for artifact in args.artifacts:
        runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
        for _ in range(args.pairs):
            for name, value in SETTINGS.items():
                env = dict(os.environ, IPEXCONVERT_PIN_THREADS=value)
                command = [sys.executable, "-c", CHILD, str(artifact), str(args.idle_ms / 1e3), str(args.calls)]
                out = subprocess.run(command, env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{artifact} ({name}): the timing process failed:\n{out.stderr[-3000:]}")
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        for name, results in runs.items():
            after = statistics.median(r["after_idle_ms"] for r in results)
            back = statistics.median(r["back_to_back_ms"] for r in results)
            print(f"| {artifact.name} | {name}, {results[0]['threads']} | {after:.2f} | {back:.2f} |", flush=True)


if __name__ == "__main__":
    main()
