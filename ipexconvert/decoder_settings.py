"""A decoder's record and data as the artifact stores them: the record read off the signature (or given by the
source, frontend/decoder_signature.py) with the user's token ids and tokenizer (ConversionConfig.decoder) over what
the source says, and the tokenizer.json bytes, read once.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .config import DecoderSettings
from .errors import ArtifactError, UserInputError
from .frontend.base import ImportedModel

TOKENIZER_FILE = "tokenizer.json"  # a decoder's Hugging Face tokenizer, stored in the artifact as data


def settle_decoder(source: ImportedModel, settings: DecoderSettings) -> dict[str, bytes]:
    """Set `source.decoder`'s token ids and tokenizer (the user's settings win over the source's) and return the
    artifact's data files ({TOKENIZER_FILE: bytes} when there is a tokenizer). Settings given for a model that is not a
    decoder, ids outside the vocabulary and an unreadable tokenizer are UserInputErrors."""
    given = settings.given()
    if source.decoder is None:
        if given:
            raise UserInputError(f"{', '.join(given)} apply to decoders (a KV cache as inputs and outputs), and "
                                 f"{source.record.location} is not one",
                                 "leave them out, or give the model the decoder signature of docs/decoders.md")
        return {}
    path = settings.tokenizer if settings.tokenizer is not None else _folder_tokenizer(source)
    blob = None if path is None else _read_tokenizer(Path(path), given=settings.tokenizer is not None)
    update: dict[str, Any] = {"tokenizer": None if blob is None else TOKENIZER_FILE}
    if settings.eos_token_ids:
        update["eos_token_ids"] = list(settings.eos_token_ids)
    if settings.bos_token_id is not None:
        update["bos_token_id"] = settings.bos_token_id
    vocab = _vocab_size(source)
    outside = [i for i in [*settings.eos_token_ids, settings.bos_token_id] if i is not None and vocab is not None
               and i >= vocab]
    if outside:
        raise UserInputError(f"token id(s) {', '.join(map(str, outside))} are outside the model's vocabulary of "
                             f"{vocab} (its logits' last dim)", "give ids the model can produce")
    source.decoder = source.decoder.model_copy(update=update)
    return {} if blob is None else {TOKENIZER_FILE: blob}


def _folder_tokenizer(source: ImportedModel) -> Optional[Path]:
    """The tokenizer.json in the source's folder (a Hugging Face folder, example:tiny-llama), if there is one."""
    if source.tokenizer_folder is None:
        return None
    path = Path(source.tokenizer_folder) / TOKENIZER_FILE
    return path if path.is_file() else None


def _read_tokenizer(path: Path, given: bool) -> bytes:
    """The file's bytes, parsed once now by the tokenizers library (plain JSON, never code) when the user named it, so
    a wrong file is an error here rather than in every generate() of the artifact."""
    if not path.is_file():
        raise UserInputError(f"--tokenizer {path} is not a file", "pass a Hugging Face tokenizer.json")
    blob = path.read_bytes()
    if given:
        from .runtime.decoder import load_tokenizer

        try:
            load_tokenizer(blob, path)
        except ArtifactError as e:
            raise UserInputError(f"--tokenizer {path} is not a tokenizer.json the tokenizers library reads "
                                 f"({e.problem})", "pass the tokenizer.json of a Hugging Face tokenizer "
                                 "(tokenizer.save('tokenizer.json'))") from None
    return blob


def _vocab_size(source: ImportedModel) -> Optional[int]:
    spec = source.program.graph.values.get(source.decoder.logits)
    size = None if spec is None else spec.shape[-1]
    return size if isinstance(size, int) else None
