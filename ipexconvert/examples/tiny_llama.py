"""`tiny-llama`: a 2-layer Llama causal LM (GQA: 4 query heads, 2 kv heads) with random weights,
traced with its KV cache as inputs and outputs (examples/decoder_cache.py)."""

from __future__ import annotations

import torch

from .decoder_cache import (DecoderShape, DecoderWithCache, decoder_dynamic_dims, decoder_example_inputs,
                            decoder_output_names)

SEQ_LEN = 32
PAST_LEN = 16  # the example call continues a 16-position cache, so conversion checks attention over a past
MAX_SEQ_LEN = 256
VOCAB_SIZE = 1000
HIDDEN, LAYERS, HEADS, KV_HEADS = 128, 2, 4, 2  # the config and the cache shape below both read these


def tiny_llama_config():
    from transformers import LlamaConfig  # optional dependency: import lazily

    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_SEQ_LEN,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="sdpa",
    )


def build_tiny_llama_lm():
    """The Hugging Face model itself (the oracle for generate())."""
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):  # keep the caller's global RNG untouched
        torch.manual_seed(3)
        model = LlamaForCausalLM(tiny_llama_config())
    return model.eval()


def build_tiny_llama():
    return DecoderWithCache(build_tiny_llama_lm()).eval()


def tiny_llama_shape():
    # Without building the config: the example's dims are declared when ipexconvert.examples is imported,
    # and transformers is imported only when a model is built.
    return DecoderShape(layers=LAYERS, kv_heads=KV_HEADS, head_dim=HIDDEN // HEADS, vocab_size=VOCAB_SIZE,
                        max_positions=MAX_SEQ_LEN)


def tiny_llama_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    return decoder_example_inputs(tiny_llama_shape(), batch_size, SEQ_LEN, PAST_LEN, seed=3)


def tiny_llama_dims() -> dict:
    return decoder_dynamic_dims(tiny_llama_shape(), max_batch=16)


def tiny_llama_outputs() -> tuple[str, ...]:
    return tuple(decoder_output_names(tiny_llama_shape()))

