"""Causal language models with the KV cache as explicit inputs and outputs.

`DecoderWithCache` wraps a Hugging Face causal LM so one traced graph serves both prefill
(no past: `past` = 0) and decode (one new token): the cache of every layer comes in as
`past_key_<i>` / `past_value_<i>` `[batch, kv_heads, past, head_dim]` and goes out as
`present_key_<i>` / `present_value_<i>` with the new positions appended. Positions follow
from the cache length. Only the last position's logits are computed (`logits [batch, 1,
vocab]`): the LM head over a whole prompt would cost more than the rest of the model.
The conversion records how to drive it (frontend/torch/decoder_record.py) and the runtime's
generate() feeds each call's present cache back as the next past (runtime/decoder.py).
"""
from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn
from pydantic import BaseModel, ConfigDict, Field

from ..errors import UserInputError
from ..ir.dynamic_dims import DynamicDim

PAST = "past"  # the dynamic dim of the cache length


def key_name(kind: str, layer: int) -> str:
    return f"{kind}_{layer}"


class DecoderShape(BaseModel):
    """What the cache looks like, read from the model's config."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    layers: int = Field(ge=1, le=1024)
    kv_heads: int = Field(ge=1, le=4096)
    head_dim: int = Field(ge=1, le=4096)
    vocab_size: int = Field(ge=1)
    max_positions: int = Field(ge=2)

    @classmethod
    def of(cls, config: Any) -> "DecoderShape":
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or int(config.hidden_size) // heads
        return cls(layers=int(config.num_hidden_layers), kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
                   head_dim=int(head_dim), vocab_size=int(config.vocab_size),
                   max_positions=int(getattr(config, "max_position_embeddings", 2048)))

    def cache_inputs(self) -> list[str]:
        return [key_name(f"past_{kind}", i) for i in range(self.layers) for kind in ("key", "value")]

    def cache_outputs(self) -> list[str]:
        return [key_name(f"present_{kind}", i) for i in range(self.layers) for kind in ("key", "value")]

    def empty_cache(self, batch: int, past: int = 0, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        return {name: torch.zeros(batch, self.kv_heads, past, self.head_dim, dtype=dtype) for name in self.cache_inputs()}


class DecoderWithCache(nn.Module):
    """input_ids + the past cache -> last-position logits + the present cache."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        _refuse_dynamic_rope(lm.config)
        self.lm = lm
        # transformers >= 5.2x names the cache argument `cache` (and warns about `past_key_values`); older ones do not know it.
        self.cache_arg = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        self.shape = _probed(DecoderShape.of(lm.config), lm, self.cache_arg)
        # torch.export binds example inputs to forward()'s named parameters: name every cache tensor.
        names = ["input_ids", *self.shape.cache_inputs()]
        self.forward = named_forward(self._forward, names)

    def _forward(self, input_ids: torch.Tensor, **past: torch.Tensor):
        from transformers import DynamicCache  # optional dependency: imported when a decoder is traced

        cache = DynamicCache(config=self.lm.config)
        # Every layer keeps every position: a sliding-window layer's window is its attention mask's job. Hugging
        # Face's sliding layers drop positions past the window and size their masks from a count of the tokens they
        # were given, which a cache seeded from tensors does not have (the mask would not match the keys).
        cache.layers = [_full_layer(layer) for layer in cache.layers]
        for i, layer in enumerate(cache.layers[:self.shape.layers]):
            # Seed each layer with the given tensors; its update() then appends with one cat.
            layer.lazy_initialization(past[key_name("past_key", i)], past[key_name("past_value", i)])
            layer.keys, layer.values = past[key_name("past_key", i)], past[key_name("past_value", i)]
        out = self.lm(input_ids=input_ids, use_cache=True, logits_to_keep=1, return_dict=True, **{self.cache_arg: cache})
        present = []
        for layer in cache.layers[:self.shape.layers]:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def _rope_types(config: Any) -> set[str]:
    """The RoPE types a config names (`rope_scaling` / `rope_parameters`, which may hold one per layer type)."""
    found, stack = set(), [getattr(config, "rope_scaling", None), getattr(config, "rope_parameters", None)]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("rope_type", item.get("type"))
            if isinstance(kind, str):
                found.add(kind)
            stack.extend(v for v in item.values() if isinstance(v, dict))
    return found


def _refuse_dynamic_rope(config: Any) -> None:
    """`dynamic` (NTK) RoPE recomputes its frequencies once the sequence outgrows the trained length: a branch on a
    run-time length that one traced graph cannot hold (torch.export stops at it with a message about guards)."""
    if "dynamic" in _rope_types(config):
        raise UserInputError(
            f"{type(config).__name__} uses `dynamic` (NTK) RoPE scaling, whose frequencies change with the sequence "
            "length at run time: not convertible yet", "convert a checkpoint with static RoPE scaling (none, linear, "
            "llama3, yarn); docs/decoders.md lists the families that convert")


def _probed(shape: DecoderShape, lm: nn.Module, cache_arg: str) -> DecoderShape:
    """The config's shape with the kv heads and head size that the model's cache really has: configs do not say
    it alike (Falcon's `num_kv_heads` counts every head while its multi-query layers cache one). One token through
    the model with an empty cache shows it."""
    from transformers import DynamicCache

    cache = DynamicCache(config=lm.config)
    try:
        with torch.no_grad():
            lm(input_ids=torch.zeros(1, 1, dtype=torch.long), use_cache=True, logits_to_keep=1, **{cache_arg: cache})
    except Exception:  # noqa: BLE001 - a model that cannot run one token fails its export with a clearer message
        return shape
    keys = getattr(cache.layers[0], "keys", None) if cache.layers else None
    if keys is None or keys.dim() != 4:
        return shape  # a cache of another form: the signature check says what does not fit
    return shape.model_copy(update={"kv_heads": int(keys.shape[1]), "head_dim": int(keys.shape[3])})


def _full_layer(layer):
    """A plain (growing, never cropped) cache layer in place of a sliding-window one; other layers as they are."""
    from transformers import cache_utils

    sliding = getattr(cache_utils, "DynamicSlidingWindowLayer", None)
    return cache_utils.DynamicLayer() if sliding is not None and isinstance(layer, sliding) else layer


def named_forward(call, names: list[str]):
    """A forward(input_ids, past_key_0, ...) calling call(input_ids, **cache), with that signature."""
    def forward(*args, **kwargs):
        bound = forward.__signature__.bind(*args, **kwargs)
        values = dict(bound.arguments)
        return call(values.pop("input_ids"), **values)

    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return forward


def decoder_dynamic_dims(shape: DecoderShape, max_batch: int) -> dict[str, dict[int, DynamicDim]]:
    batch = DynamicDim("batch", 1, max_batch)
    dims: dict[str, dict[int, DynamicDim]] = {
        "input_ids": {0: batch, 1: DynamicDim("seq", 1, shape.max_positions)}}
    for name in shape.cache_inputs():
        dims[name] = {0: batch, 2: DynamicDim(PAST, 0, shape.max_positions - 1)}
    return dims


def decoder_example_inputs(shape: DecoderShape, batch: int, seq: int, past: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Token ids and a random past cache (a cache of zeros would hide attention errors)."""
    generator = torch.Generator().manual_seed(seed)
    inputs = {"input_ids": torch.randint(0, shape.vocab_size, (batch, seq), generator=generator)}
    for name in shape.cache_inputs():
        inputs[name] = torch.randn(batch, shape.kv_heads, past, shape.head_dim, generator=generator)
    return inputs


def decoder_output_names(shape: DecoderShape) -> list[str]:
    return ["logits", *shape.cache_outputs()]
