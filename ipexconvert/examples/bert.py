"""`bert-base`: a randomly initialised bert-base-uncased sized BertModel, plus the shared wrapper.

The wrapper exists because HF models return ModelOutput objects and take many optional
arguments; converters want keyword tensors in and a plain tuple of tensors out.
"""

from __future__ import annotations

import torch
from torch import nn

SEQ_LEN = 128


class BertEncoder(nn.Module):
    """input_ids + attention_mask -> (last_hidden_state, pooler_output)."""

    def __init__(self, bert: nn.Module):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        output = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return output.last_hidden_state, output.pooler_output


def build_bert(config_kwargs: dict, attn_implementation: str = "sdpa", seed: int = 0) -> BertEncoder:
    """Seeded random-weight BertModel (with pooler) in eval mode, wrapped."""
    from transformers import BertConfig, BertModel  # optional dependency: import lazily

    config = BertConfig(**config_kwargs, attn_implementation=attn_implementation)
    with torch.random.fork_rng(devices=[]):  # keep the caller's global RNG untouched
        torch.manual_seed(seed)
        model = BertModel(config, add_pooling_layer=True)
    return BertEncoder(model).eval()


def padded_token_inputs(batch_size: int, seq_len: int, vocab_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random token ids with an attention mask; rows after the first get trailing padding.

    Row i keeps seq_len - i * seq_len // (2 * batch_size) tokens, so the last row is a bit
    over half padding. This makes masking matter whenever batch_size > 1.
    """
    generator = torch.Generator().manual_seed(seed)
    # Ids 0..999 are [PAD]/[unused]/special in the real BERT vocab; draw real-ish word ids when possible.
    low = 1000 if vocab_size > 2000 else 1
    input_ids = torch.randint(low, vocab_size, (batch_size, seq_len), generator=generator)
    attention_mask = torch.ones(batch_size, seq_len, dtype=torch.int64)
    for row in range(1, batch_size):
        length = seq_len - row * seq_len // (2 * batch_size)
        attention_mask[row, length:] = 0
        input_ids[row, length:] = 0  # the [PAD] id
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def build_bert_base() -> BertEncoder:
    return build_bert({})  # BertConfig() defaults are the bert-base-uncased sizes


def bert_base_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    return padded_token_inputs(batch_size, SEQ_LEN, vocab_size=30522)
