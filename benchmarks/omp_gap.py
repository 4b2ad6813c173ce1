"""How long one bf16 oneDNN linear takes when the calling thread does other work between calls, by OpenMP wait
policy: tests whether the artifact's many-thread slowdown on the 16-core AMX host is its worker threads going to
sleep between ops (the executor's Python work between kernels is a gap that eager's back-to-back calls lack).

One child process per wait setting (libgomp reads it when torch loads it); in each, for each gap the calling thread
busy-waits that many microseconds between calls; median ms of the linear call itself.

    python benchmarks/omp_gap.py --threads 16
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

GAPS_US = (0, 10, 30, 100, 300, 1000)
SETTINGS = {"libgomp default": {}, "GOMP_SPINCOUNT=30000": {"GOMP_SPINCOUNT": "30000"},
            "OMP_WAIT_POLICY=ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
            "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}}


def child(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    x, w = torch.randn(128, 384).bfloat16(), torch.randn(1536, 384).bfloat16()
    packed = torch.ops.mkldnn._reorder_linear_weight(w, None)
    out = {}
    with torch.inference_mode():
        for gap in GAPS_US:
            samples = []
            for i in range(120):
                until = time.perf_counter() + gap * 1e-6
                while time.perf_counter() < until:
                    pass
                start = time.perf_counter()
                torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
                if i >= 20:
                    samples.append((time.perf_counter() - start) * 1e3)
            out[gap] = statistics.median(samples)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.threads)
        return
    print(f"oneDNN bf16 linear 128x384->1536, {args.threads} threads, median ms by gap between calls (us)")
    print("| wait setting | " + " | ".join(str(g) for g in GAPS_US) + " |")
    print("|---|" + "---:|" * len(GAPS_US))
    for name, extra in SETTINGS.items():
        env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
        env.update(extra)
        out = subprocess.run([sys.executable, __file__, "--child", "--threads", str(args.threads)],
                             capture_output=True, text=True, env=env)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {name} | " + " | ".join(f"{r[str(g)]:.3f}" for g in GAPS_US) + " |", flush=True)


if __name__ == "__main__":
    main()
