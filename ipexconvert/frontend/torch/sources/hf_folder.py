"""A Hugging Face model folder (config.json + *.safetensors), loaded offline with transformers.

Encoder models return (last_hidden_state[, pooler_output]); causal LMs are traced with their KV
cache as inputs and outputs (examples/decoder_cache.py), for generate();
a sentence-transformers folder (modules.json with mean pooling) returns the pooled,
normalised sentence embedding.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from ....errors import UserInputError
from ....ir.dynamic_dims import DynamicDim
from ....manifest import SourceRecord
from ....examples.decoder_cache import (DecoderWithCache, decoder_dynamic_dims, decoder_example_inputs,
                                        decoder_output_names)
from ..decoder_record import decoder_record
from .base import ResolvedSource, SourceRequest, sha256_of

DEFAULT_SEQ = 128


def matches(request: SourceRequest) -> bool:
    return Path(request.location).is_dir()


class _EncoderOutputs(nn.Module):
    def __init__(self, model: nn.Module, with_pooler: bool):
        super().__init__()
        self.model = model
        self.with_pooler = with_pooler

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return (out.last_hidden_state, out.pooler_output) if self.with_pooler else out.last_hidden_state


def _causal_lm_architectures(transformers) -> set[str]:
    """Class names transformers builds for causal LMs (LlamaForCausalLM, GPT2LMHeadModel, ...)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    names: set[str] = set()
    for value in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values():
        names.update([value] if isinstance(value, str) else value)
    return names


def _is_sentence_transformer(folder: Path) -> bool:
    modules = folder / "modules.json"
    if not modules.is_file():
        return False
    types = [m.get("type", "") for m in json.loads(modules.read_text())]
    pooling = folder / "1_Pooling" / "config.json"
    return any(t.endswith("Pooling") for t in types) and pooling.is_file() and \
        json.loads(pooling.read_text()).get("pooling_mode_mean_tokens", False)


def load(request: SourceRequest) -> ResolvedSource:
    folder = Path(request.location)
    if not (folder / "config.json").is_file():
        raise UserInputError(f"{folder} is a folder without config.json",
                             "pass a Hugging Face model folder (config.json + model.safetensors)")
    if not list(folder.glob("*.safetensors")):
        raise UserInputError(f"{folder} has no *.safetensors weights",
                             "save the model with model.save_pretrained(folder, safe_serialization=True); "
                             "pickled pytorch_model.bin checkpoints are not read")
    try:
        import transformers
    except ModuleNotFoundError:
        raise UserInputError("reading a Hugging Face folder needs transformers", "pip install 'ipexconvert[hf]'") from None
    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    archs = config.architectures or []
    causal = any(a in _causal_lm_architectures(transformers) for a in archs)
    loader = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    model = _load_model(loader, folder, config)
    if causal:
        return _decoder_source(folder, model)
    if _is_sentence_transformer(folder):
        from ....examples.minilm import SentenceEmbedder

        wrapper: nn.Module = SentenceEmbedder(model)
        outputs = ["sentence_embedding"]
    else:
        with_pooler = getattr(model, "pooler", None) is not None
        wrapper = _EncoderOutputs(model, with_pooler)
        outputs = ["last_hidden_state", "pooler_output"] if with_pooler else ["last_hidden_state"]
    vocab = int(getattr(config, "vocab_size", 1000))
    max_seq = int(getattr(config, "max_position_embeddings", 512))
    batch, seq = DynamicDim(name="batch", min=1, max=64), DynamicDim(name="seq", min=2, max=max_seq)
    generator = torch.Generator().manual_seed(0)
    seq_len = min(DEFAULT_SEQ, max_seq)
    example = {
        "input_ids": torch.randint(1, vocab, (1, seq_len), generator=generator),
        "attention_mask": torch.ones(1, seq_len, dtype=torch.int64),
    }
    return ResolvedSource(
        record=SourceRecord(kind="hf-folder", location=str(folder), sha256=sha256_of(folder)),
        module=wrapper.eval(), example_inputs=example,
        dynamic={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
        output_names=outputs, int_high=vocab, tokenizer_folder=folder)


def _load_model(loader, folder: Path, config) -> nn.Module:
    """The model with torch's scaled_dot_product_attention (one node the attention passes fuse), or with the
    family's own attention where transformers has no sdpa version of it (Gemma 2's logit soft-capping, BLOOM's
    ALiBi): the same model written as matmuls and a softmax."""
    for attention in ("sdpa", "eager"):
        config._attn_implementation = attention
        try:
            return loader.from_pretrained(folder, config=config, local_files_only=True, use_safetensors=True).eval()
        except Exception as e:  # transformers raises many types for an unusable folder
            if attention == "sdpa" and "scaled_dot_product_attention" in str(e):
                continue
            raise UserInputError(f"transformers could not load {folder}: {e}",
                                 "check that the folder holds a complete model") from None
    raise AssertionError("unreachable: the eager attempt returns or raises")


def _decoder_source(folder: Path, model: nn.Module) -> ResolvedSource:
    """A causal LM with its KV cache as inputs/outputs; the example call continues a short random cache."""
    wrapper = DecoderWithCache(model).eval()
    shape = wrapper.shape
    seq = min(DEFAULT_SEQ // 4, shape.max_positions // 2)
    return ResolvedSource(
        record=SourceRecord(kind="hf-folder", location=str(folder), sha256=sha256_of(folder)),
        module=wrapper, example_inputs=decoder_example_inputs(shape, 1, seq, past=min(8, seq)),
        dynamic=decoder_dynamic_dims(shape, max_batch=64), output_names=decoder_output_names(shape),
        int_high=shape.vocab_size, tokenizer_folder=folder, decoder=decoder_record(wrapper))
