"""Built-in example models, usable as `example:NAME` sources and in tests.

Each entry says how to build the model, how to make example inputs for a batch size, which
input axes may vary at run time, and what the outputs are called. Heavy imports
(transformers, tokenizers, the MiniLM weights) only happen when a model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from ..ir.dynamic_dims import DynamicDim
from . import bert, minilm, resnet, tiny_bert, tiny_cnn, tiny_llama

__all__ = ["DynamicDim", "ExampleModel", "EXAMPLES", "get_example"]


@dataclass(frozen=True)
class ExampleModel:
    name: str
    description: str
    build: Callable[[], torch.nn.Module]  # eval() mode, deterministic weights
    example_inputs: Callable[[int], dict[str, torch.Tensor]]  # batch size -> keyword inputs, in forward() order
    dynamic_dims: dict[str, dict[int, DynamicDim]]  # input name -> axis -> DynamicDim
    output_names: tuple[str, ...]  # forward() returns one Tensor or a tuple in this order
    task: str  # "classification", "embedding", "hidden-states", "causal-lm"
    tokenizer_folder: Optional[Callable[[], Path]] = None  # folder of the model's Hugging Face tokenizer


def _batch(max_batch: int) -> DynamicDim:
    return DynamicDim("batch", 1, max_batch)


def _seq(max_seq: int) -> DynamicDim:
    return DynamicDim("seq", 2, max_seq)


def _token_dims(max_batch: int, max_seq: int) -> dict[str, dict[int, DynamicDim]]:
    axes = {0: _batch(max_batch), 1: _seq(max_seq)}
    return {"input_ids": dict(axes), "attention_mask": dict(axes)}


_EXAMPLE_LIST = [
    ExampleModel(
        name="resnet50",
        description="ResNet-50 image classifier (random weights, calibrated BatchNorm), 3x224x224 input",
        build=resnet.build_resnet50,
        example_inputs=resnet.resnet50_inputs,
        dynamic_dims={"pixel_values": {0: _batch(64)}},
        output_names=("logits",),
        task="classification",
    ),
    ExampleModel(
        name="tiny-cnn",
        description="Small ResNet (one bottleneck per stage, width 16, 10 classes), 3x64x64 input",
        build=tiny_cnn.build_tiny_cnn,
        example_inputs=tiny_cnn.tiny_cnn_inputs,
        dynamic_dims={"pixel_values": {0: _batch(64)}},
        output_names=("logits",),
        task="classification",
    ),
    ExampleModel(
        name="bert-base",
        description="BERT-base encoder (bert-base-uncased sizes, random weights, SDPA attention), seq 128",
        build=bert.build_bert_base,
        example_inputs=bert.bert_base_inputs,
        dynamic_dims=_token_dims(64, 512),
        output_names=("last_hidden_state", "pooler_output"),
        task="hidden-states",
    ),
    ExampleModel(
        name="tiny-bert",
        description="2-layer, 64-wide BERT encoder (random weights, SDPA attention), seq 16",
        build=tiny_bert.build_tiny_bert,
        example_inputs=tiny_bert.tiny_bert_inputs,
        dynamic_dims=_token_dims(64, tiny_bert.MAX_SEQ_LEN),
        output_names=("last_hidden_state", "pooler_output"),
        task="hidden-states",
    ),
    ExampleModel(
        name="tiny-bert-eager",
        description="tiny-bert with explicit matmul/softmax attention (same weights), for attention fusion",
        build=tiny_bert.build_tiny_bert_eager,
        example_inputs=tiny_bert.tiny_bert_inputs,
        dynamic_dims=_token_dims(64, tiny_bert.MAX_SEQ_LEN),
        output_names=("last_hidden_state", "pooler_output"),
        task="hidden-states",
    ),
    ExampleModel(
        name="minilm",
        description="all-MiniLM-L6-v2 sentence embeddings (real weights, mean pooling, L2-normalised), seq 128",
        build=minilm.build_minilm,
        example_inputs=minilm.minilm_inputs,
        tokenizer_folder=minilm.model_folder,
        dynamic_dims=_token_dims(64, 512),
        output_names=("sentence_embedding",),
        task="embedding",
    ),
    ExampleModel(
        name="tiny-llama",
        description="2-layer Llama causal LM (GQA 4/2 heads, random weights, KV cache as inputs/outputs), "
                    "seq 32 after 16 cached positions",
        build=tiny_llama.build_tiny_llama,
        example_inputs=tiny_llama.tiny_llama_inputs,
        dynamic_dims=tiny_llama.tiny_llama_dims(),
        output_names=tiny_llama.tiny_llama_outputs(),
        task="causal-lm",
    ),
]

EXAMPLES: dict[str, ExampleModel] = {example.name: example for example in _EXAMPLE_LIST}


def get_example(name: str) -> ExampleModel:
    try:
        return EXAMPLES[name]
    except KeyError:
        available = ", ".join(EXAMPLES)
        raise ValueError(f"Unknown example model {name!r}. Available: {available}") from None
