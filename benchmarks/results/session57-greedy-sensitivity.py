"""How sensitive are a random-weight TinyLlama's greedy tokens to one bf16 rounding step? (Session 57: the GPU's joined
attention + o projection adds the key splits in another order and changed the greedy tokens of gpu_decode.py.)

The TinyLlama-1.1B-shaped module of benchmarks/qwen2_module.py (random weights as gpu_decode.py makes them), bf16,
eager PyTorch on the CPU, greedy, a growing cache. The perturbed run moves one element of one layer's attention output
(the o projection's input) by one bf16 step at every token, about what a different order of the splits' sums does
to a handful of values a step. Printed: the tokens each way, where they first differ, and the gap between the two
largest logits relative to their spread.

    python benchmarks/results/session57-greedy-sensitivity.py [--rounds 3] [--prompt 128] [--new 32]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qwen2_module import SHAPES, Qwen2Shaped  # noqa: E402


def greedy(module, prompt: torch.Tensor, new: int) -> tuple[list[int], list[float]]:
    shape = module.shape
    cache = {name: torch.zeros(1, shape.kv_heads, 0, shape.head_dim, dtype=torch.bfloat16)
             for name in shape.cache_inputs()}
    ids, tokens, gaps = prompt, [], []
    with torch.inference_mode():
        for _ in range(new):
            out = module(ids, **cache)
            logits = out["logits"][0, -1].float()
            top = logits.topk(2).values
            gaps.append(((top[0] - top[1]) / logits.std()).item())
            ids = logits.argmax().view(1, 1)
            tokens.append(int(ids))
            cache = {k.replace("present_", "past_"): v for k, v in out.items() if k.startswith("present_")}
    return tokens, gaps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--layer", type=int, default=10)
    args = ap.parse_args()
    module = Qwen2Shaped(**SHAPES["tinyllama-1.1b"]).to(torch.bfloat16)
    o = module.layers[args.layer].o

    def one_step_up(_, inputs):
        (x,) = inputs
        x = x.clone()
        v = x[..., -1, 7]  # one element of the last row: one bf16 step away from 0
        x[..., -1, 7] = (v.view(torch.int16) + 1).view(torch.bfloat16)
        return (x,)

    for r in range(args.rounds):
        prompt = torch.randint(1, SHAPES["tinyllama-1.1b"]["vocab"], (1, args.prompt),
                               generator=torch.Generator().manual_seed(r))
        base, gaps = greedy(module, prompt, args.new)
        handle = o.register_forward_pre_hook(one_step_up)
        moved, _ = greedy(module, prompt, args.new)
        handle.remove()
        first = next((i for i, (a, b) in enumerate(zip(base, moved)) if a != b), None)
        gaps.sort()
        print(f"round {r}: tokens {'differ from token ' + str(first) if first is not None else 'identical'}; "
              f"top-1 - top-2 logit gap / logits' std: min {gaps[0]:.4f}, median {gaps[len(gaps) // 2]:.4f}",
              flush=True)


if __name__ == "__main__":
    main()
