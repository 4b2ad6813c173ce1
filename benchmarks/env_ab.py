"""A/B of a native kernel change that an environment variable switches at run time, in one process and in interleaved
rounds: the way to judge a kernel experiment on a noisy shared host, where two builds timed in turn differ by more
than the change (session 52: the same decode attention timed 39.6 then 47-66 us a layer minutes apart).

The experiment's patch reads the variable on each call (std::getenv, set from here through os.environ), e.g.
benchmarks/results/session52-woq-prefetchnta.patch (IPXC_EXP_NTA) or session52-decode-attention-f32-blocks.patch
(IPXC_EXP_OLD). Apply it, build, then:

    python benchmarks/env_ab.py decode MODEL.ipxc --env IPXC_EXP_NTA=1 [--rounds 30] [--prompt 512]
        bound decode steps (what generate() runs) after a random prompt; each round 1 untimed and 6 timed steps per side
    python benchmarks/env_ab.py decode MODEL.ipxc --env IPEXCONVERT_MKL_FP32=0 --at-load
        the same for a variable read when the kernels are chosen: the artifact loaded twice, once with it set
    python benchmarks/env_ab.py attention --env IPXC_EXP_OLD=1 [--evict-mb 512] [--rounds 200]
        24 layers of Qwen2-0.5B decode attention (14 heads over 2 kv heads, 64 dims, 530 float32 positions), the
        caches evicted by a write of --evict-mb before each timed pass (0: warm, the pass run once before)

Prints each side's median and the median of the per-round ratios (variable set / unset), with their range.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch


def decode_workload(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from decode_profile import after_prompt
    from decode_step_costs import timed as median_seconds
    from ipexconvert.api import load_artifact

    cache, step = after_prompt(load_artifact(args.artifact), args.prompt)
    cache.bind_steps = True

    def timed() -> float:
        cache.advance(step)
        return 1e3 * median_seconds(lambda: cache.advance(step), 6)
    return timed, "ms a step"


def attention_workload(args):
    from ipexconvert.backends.cpu import native_lib

    g = torch.Generator().manual_seed(0)
    layers, n, threads = 24, 530, torch.get_num_threads()
    queries = [torch.randn(1, 14, 1, 64, generator=g) for _ in range(layers)]
    caches = [tuple(torch.randn(1, 2, n + 256, 64, generator=g) for _ in range(2)) for _ in range(layers)]
    mask = torch.zeros(1, 1, 1, n)
    outs = [torch.empty(1, 1, 14, 64).permute(0, 2, 1, 3) for _ in range(layers)]
    evict = torch.empty(max(args.evict_mb, 1) << 20, dtype=torch.uint8)

    def attend() -> None:
        for q, (k, v), out in zip(queries, caches, outs):
            native_lib.raw.decode_attention(q, k[:, :, :n], v[:, :, :n], out, mask, 0.125, None, threads)

    def timed() -> float:
        if args.evict_mb:
            evict.add_(1)
        else:
            attend()
        start = time.perf_counter()
        attend()
        return 1e6 * (time.perf_counter() - start) / layers
    return timed, "us a layer"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=["decode", "attention"])
    ap.add_argument("artifact", nargs="?", help="a decoder artifact (decode)")
    ap.add_argument("--env", required=True, help="NAME=VALUE: the variable the experiment reads")
    ap.add_argument("--rounds", type=int, default=None, help="default: 30 (decode), 200 (attention)")
    ap.add_argument("--prompt", type=int, default=512, help="cached positions before the timed steps (decode)")
    ap.add_argument("--evict-mb", type=int, default=512, help="MB written before each timed pass (attention)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--at-load", action="store_true",
                    help="for a variable read when kernels are chosen (at load): two copies of the workload, one made "
                         "with it set, timed in the same interleaved rounds")
    args = ap.parse_args()
    name, _, value = args.env.partition("=")
    if not name or not value:
        ap.error("--env takes NAME=VALUE")
    if args.workload == "decode" and not args.artifact:
        ap.error("decode needs an artifact")
    torch.set_num_threads(args.threads)
    workload = decode_workload if args.workload == "decode" else attention_workload

    def switch(side: str) -> None:
        if side == "set":
            os.environ[name] = value
        else:
            os.environ.pop(name, None)

    timers = {}
    for side in (("unset", "set") if args.at_load else ("unset",)):
        switch(side)
        timers[side], unit = workload(args)
    timers.setdefault("set", timers["unset"])
    rounds = args.rounds or (30 if args.workload == "decode" else 200)
    samples = {"unset": [], "set": []}
    for r in range(rounds):
        for side in (("unset", "set") if r % 2 == 0 else ("set", "unset")):
            switch(side)
            samples[side].append(timers[side]())
    os.environ.pop(name, None)
    ratios = [a / b for a, b in zip(samples["set"], samples["unset"])]
    print(f"{args.workload} {args.artifact or ''} {args.threads} threads, {rounds} rounds: {name} unset "
          f"{statistics.median(samples['unset']):.2f} {unit}, {name}={value} {statistics.median(samples['set']):.2f}; "
          f"set / unset median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
