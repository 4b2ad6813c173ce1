"""`tiny-bert` / `tiny-bert-eager`: a 2-layer, 64-wide BERT for fast tests.

The eager variant computes attention as explicit matmul -> softmax -> matmul (instead of
one scaled_dot_product_attention call), which is what an attention-fusion pass must match.
"""

from __future__ import annotations

import torch

from .bert import BertEncoder, build_bert, padded_token_inputs

SEQ_LEN = 16
MAX_SEQ_LEN = 128
VOCAB_SIZE = 1000

TINY_BERT_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=MAX_SEQ_LEN,
)


def build_tiny_bert() -> BertEncoder:
    return build_bert(TINY_BERT_CONFIG, attn_implementation="sdpa", seed=2)


def build_tiny_bert_eager() -> BertEncoder:
    # Same seed as tiny-bert, so both variants have identical weights and outputs.
    return build_bert(TINY_BERT_CONFIG, attn_implementation="eager", seed=2)


def tiny_bert_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    return padded_token_inputs(batch_size, SEQ_LEN, vocab_size=VOCAB_SIZE, seed=2)
