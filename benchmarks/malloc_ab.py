"""Process-level A/B of the malloc tuning (backends/cpu/malloc.py): page faults and latency with it on and off.

    python benchmarks/malloc_ab.py ART.ipxc[:BATCH] [ART.ipxc[:BATCH] ...] --pairs 3 --rounds 15

The tuning is process-wide and set once, so it cannot be A/B'd inside one process like
benchmarks/ab.py does: each side runs in a fresh interpreter (IPEXCONVERT_MALLOC_TUNING=0 for
"off"), the two alternating, --pairs times per artifact. Each process loads the artifact, runs
5 warm-up calls, then --rounds timed calls; it reports the median latency and the minor page
faults per call (getrusage). The table gives each side's median over its processes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_ONE_PROCESS = r"""
import json, resource, statistics, sys, time
import ipexconvert
from ipexconvert.artifact import read_example_inputs
from ipexconvert.bench import resize_inputs
from ipexconvert.backends.cpu import malloc
path, batch, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = ipexconvert.load_artifact(path, threads=int(sys.argv[4]))
inputs = read_example_inputs(path)
if batch:
    inputs = resize_inputs(inputs, model, {"batch": int(batch)})
for _ in range(5):
    model.run_dict(inputs)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
times = []
for _ in range(rounds):
    start = time.perf_counter()
    model.run_dict(inputs)
    times.append(time.perf_counter() - start)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / rounds
print(json.dumps({"ms": statistics.median(times) * 1e3, "faults": faults, "tuning": malloc.current().state}))
"""


def one_process(path: str, batch: str, rounds: int, threads: int, tuned: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "IPEXCONVERT_MALLOC_TUNING"}
    if not tuned:
        env["IPEXCONVERT_MALLOC_TUNING"] = "0"
    proc = subprocess.run([sys.executable, "-c", _ONE_PROCESS, path, batch, str(rounds), str(threads)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifacts", nargs="+", help="ART.ipxc, or ART.ipxc:BATCH to resize the stored inputs")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print("| artifact | batch | faults/call off | faults/call on | off ms | on ms | on / off |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for item in args.artifacts:
        path, _, batch = item.partition(":")
        sides: dict[bool, list[dict]] = {False: [], True: []}
        for _ in range(args.pairs):
            for tuned in (False, True):
                sides[tuned].append(one_process(path, batch, args.rounds, args.threads, tuned))
        assert all(r["tuning"] == ("applied" if t else "skipped") for t, rs in sides.items() for r in rs), sides
        off, on = (statistics.median(r["ms"] for r in sides[t]) for t in (False, True))
        faults = {t: f"{min(r['faults'] for r in rs):.0f}-{max(r['faults'] for r in rs):.0f}" for t, rs in sides.items()}
        print(f"| {Path(path).name} | {batch or 'stored'} | {faults[False]} | {faults[True]} | {off:.1f} | {on:.1f} | "
              f"{on / off:.3f} |", flush=True)


if __name__ == "__main__":
    main()
