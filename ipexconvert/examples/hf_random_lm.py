"""Tiny Hugging Face causal LMs with random weights, from a family's config fields: the decoder-family tests
(tests/e2e/test_decoder_families.py) and survey (benchmarks/decoder_families.py) build theirs here, and both compare
with transformers' own greedy generate()."""
from __future__ import annotations

import torch


def random_causal_lm(settings: dict, seed: int = 0):
    """transformers' model for `settings`: `model_type` and config fields, plus two of ours: "attention" (the
    reference's attention, default "sdpa"; transformers has no sdpa version of some families) and "init_std" (the
    spread of the random 2-D weights, default 0.2: wide enough that greedy tokens vary step to step, not so wide that
    they saturate). The global RNG is left as it was."""
    import transformers

    settings = dict(settings)
    attention, init_std = settings.pop("attention", "sdpa"), settings.pop("init_std", 0.2)
    config = transformers.AutoConfig.for_model(settings.pop("model_type"), **settings)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lm = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention).eval()
        with torch.no_grad():
            for p in lm.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, init_std)
    return lm


def greedy_tokens(lm, prompt: torch.Tensor, new_tokens: int) -> list[int]:
    """transformers' greedy generate() of exactly `new_tokens` after prompt [1, n] (no early stop at eos)."""
    with torch.inference_mode():
        out = lm.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return out[0, prompt.shape[1]:].tolist()
