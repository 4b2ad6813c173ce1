"""The manifest's decoder record of a Hugging Face causal LM traced with its KV cache (examples/decoder_cache.py),
with its config's eos/bos ids; import_model checks it equals the record read off the signature
(frontend/decoder_signature.py), which every other decoder gets."""
from __future__ import annotations

from typing import Any, Optional

from torch import nn

from ...examples.decoder_cache import PAST, DecoderWithCache
from ...manifest import DecoderRecord


def _token_ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def decoder_record(module: nn.Module, tokenizer: Optional[str] = None) -> Optional[DecoderRecord]:
    """How generate() drives `module`, if it is a DecoderWithCache (None otherwise)."""
    if not isinstance(module, DecoderWithCache):
        return None
    gen = getattr(module.lm, "generation_config", None)
    config = module.lm.config
    eos = _token_ids(getattr(gen, "eos_token_id", None)) or _token_ids(getattr(config, "eos_token_id", None))
    bos = getattr(gen, "bos_token_id", None)
    bos = getattr(config, "bos_token_id", None) if bos is None else bos
    shape = module.shape
    pairs = list(zip(shape.cache_inputs(), shape.cache_outputs()))
    return DecoderRecord(cache=pairs, cache_dim=PAST, bos_token_id=None if bos is None else int(bos),
                         eos_token_ids=eos, tokenizer=tokenizer)
