"""`tiny-llama`: a 2-layer Llama causal LM (GQA: 4 query heads, 2 kv heads) with random weights."""

from __future__ import annotations

import torch
from torch import nn

SEQ_LEN = 32
MAX_SEQ_LEN = 256
VOCAB_SIZE = 1000


class CausalLMLogits(nn.Module):
    """input_ids -> logits, with the KV cache disabled so the graph is a pure function."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, use_cache=False, return_dict=True).logits


def build_tiny_llama() -> CausalLMLogits:
    from transformers import LlamaConfig, LlamaForCausalLM  # optional dependency: import lazily

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_SEQ_LEN,
        use_cache=False,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):  # keep the caller's global RNG untouched
        torch.manual_seed(3)
        model = LlamaForCausalLM(config)
    return CausalLMLogits(model).eval()


def tiny_llama_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return {"input_ids": torch.randint(0, VOCAB_SIZE, (batch_size, SEQ_LEN), generator=generator)}
