"""Where a decode step's time goes: a decoder artifact is prefilled with a random prompt, then one-token steps
are timed (median) and profiled per kernel kind (the executor's own profile: each step timed around its kernel
call, so the sum includes the call overhead of every step). --prefill profiles the prompt's own call instead.

    python benchmarks/decode_profile.py model.ipxc [--prompt 512] [--threads 2] [--prefill]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ipexconvert.api import load_artifact
from ipexconvert.runtime.decoder import GrowingCache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifact")
    ap.add_argument("--prompt", type=int, default=512, help="cached positions before the profiled steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--prefill", action="store_true", help="profile the prompt's call (an empty cache) instead")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_artifact(args.artifact)
    record = model.decoder.record
    if args.prefill:
        return profile_prefill(model, record, random_prompt(model, args.prompt), args)
    cache, step = after_prompt(model, args.prompt)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        cache.advance(step)
        times.append(time.perf_counter() - start)
    totals: dict[str, float] = {}
    for _ in range(args.steps):
        out: dict = {}  # the profiled step's caches go to the next one, as a call's do (an older past is copied)
        for kind, seconds in model.profile({record.input_ids: step, **cache.past}, outputs=out).items():
            totals[kind] = totals.get(kind, 0.0) + seconds / args.steps
        cache.past = {p: out[o] for p, o in record.cache}
    print(f"{args.artifact}: decode step at ~{args.prompt} cached positions, {args.threads} threads: "
          f"median {1e3 * statistics.median(times):.2f} ms; {len(model.executor.main)} steps, profiled sum "
          f"{1e3 * sum(totals.values()):.2f} ms")
    print("| kernel | ms per step |\n|---|---:|")
    for kind, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {kind} | {1e3 * seconds:.3f} |")


def random_prompt(model, length: int) -> torch.Tensor:
    """Token ids [1, length] drawn from the decoder's vocabulary (seed 0)."""
    record = model.decoder.record
    vocab = model.signature.outputs[[o.name for o in model.signature.outputs].index(record.logits)].spec.shape[-1]
    return torch.randint(0, int(vocab), (1, length), generator=torch.Generator().manual_seed(0))


def after_prompt(model, length: int) -> tuple[GrowingCache, torch.Tensor]:
    """generate()'s own steps (the cache grows in place) after a random prompt of `length` tokens and 3 one-token
    steps, and the one-token ids to step with."""
    cache, step = GrowingCache(model.decoder), torch.tensor([[1]])
    cache.start(random_prompt(model, length), length + 1000, torch.device("cpu"))
    for _ in range(3):
        cache.advance(step)
    return cache, step


def profile_prefill(model, record, ids, args, calls: int = 3) -> None:
    empty = model.decoder._empty_cache(1)
    model.run_dict({record.input_ids: ids, **empty})  # warm-up
    times, totals = [], {}
    for _ in range(calls):
        start = time.perf_counter()
        model.run_dict({record.input_ids: ids, **model.decoder._empty_cache(1)})
        times.append(time.perf_counter() - start)
        for kind, seconds in model.profile({record.input_ids: ids, **model.decoder._empty_cache(1)}).items():
            totals[kind] = totals.get(kind, 0.0) + seconds / calls
    print(f"{args.artifact}: prefill of {args.prompt} tokens, {args.threads} threads: median "
          f"{1e3 * statistics.median(times):.1f} ms; profiled sum {1e3 * sum(totals.values()):.1f} ms")
    print("| kernel | ms per prefill |\n|---|---:|")
    for kind, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {kind} | {1e3 * seconds:.2f} |")


if __name__ == "__main__":
    main()
