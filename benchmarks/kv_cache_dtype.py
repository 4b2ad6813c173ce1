"""Decode steps of decoder artifacts side by side at several cache lengths: e.g. the same model with its KV cache in
float32 and in bf16 (`--kv-cache bf16`; `benchmarks/qwen2_module.py --dtypes int4-a8,int4-a8-kv16`). Each artifact
is prefilled with the same random prompt of each length, then timed one chained decode step after another in
interleaved rounds (median ms a step, with the cache's bytes a step beside the weights'):

    python benchmarks/kv_cache_dtype.py A.ipxc B.ipxc [--lengths 512,2048] [--rounds 5] [--steps 6] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from ipexconvert.api import load_artifact
from ipexconvert.decoder_bench import decode_weight_bytes
from ipexconvert.runtime.decoder import GrowingCache


class Chain:
    """One artifact's generation state (runtime/decoder.py's GrowingCache, as generate() drives it): its cache after
    the prompt, advanced one token a call."""

    def __init__(self, model, prompt: torch.Tensor):
        self.cache = GrowingCache(model.decoder)
        self.cache.start(prompt, prompt.shape[1] + 1, model.decoder.device)

    def step(self) -> float:
        start = time.perf_counter()
        self.cache.advance(torch.tensor([[1]]))
        return time.perf_counter() - start

    def cache_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.cache.past.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifacts", nargs="+", type=Path)
    ap.add_argument("--lengths", default="512,2048", help="cached positions before the timed steps")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="decode steps per artifact and round")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    models = {path.name: load_artifact(path) for path in args.artifacts}
    weights = {name: decode_weight_bytes(m.graph) for name, m in models.items()}
    print(f"{args.threads} threads; {args.rounds} interleaved rounds of {args.steps} decode steps per artifact")
    print("| cached positions | artifact | KV cache read a step | weights read a step | decode ms/token (median) |")
    print("|---:|---|---:|---:|---:|")
    for length in (int(x) for x in args.lengths.split(",")):
        prompt = torch.randint(0, 1000, (1, length), generator=torch.Generator().manual_seed(length))
        chains = {name: Chain(m, prompt) for name, m in models.items()}
        for chain in chains.values():
            chain.step()  # warm
        samples = {name: [] for name in chains}
        for _ in range(args.rounds):
            for name, chain in chains.items():
                samples[name].extend(chain.step() for _ in range(args.steps))
        for name, chain in chains.items():
            print(f"| {length} | {name} | {chain.cache_bytes() / 1e6:.1f} MB | {weights[name] / 1e6:.0f} MB | "
                  f"{1e3 * statistics.median(samples[name]):.2f} |")
        del chains


if __name__ == "__main__":
    main()
