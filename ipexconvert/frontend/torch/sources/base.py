"""What a source reader returns, and what it is asked for."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field

from ....ir.dynamic_dims import DynamicDims
from ....manifest import DecoderRecord, SourceRecord


class SourceRequest(BaseModel):
    """Everything the user said about where the model comes from."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    location: str
    model_factory: Optional[str] = Field(default=None, description="package.module:function building the nn.Module")
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    trust_pickle: bool = False


@dataclass
class ResolvedSource:
    """A model ready for export: the eager module (the accuracy oracle) and how to call it."""

    record: SourceRecord
    module: Optional[torch.nn.Module] = None
    exported: Optional[torch.export.ExportedProgram] = None
    example_inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    dynamic: DynamicDims = field(default_factory=dict)
    output_names: Optional[list[str]] = None
    int_high: int = 100  # upper bound for random integer inputs (vocab size for token ids)
    eager_fn: Optional[Callable[..., Any]] = None  # called with keyword inputs; defaults to module
    tokenizer_folder: Optional[Path] = None  # where a Hugging Face tokenizer for the model lives (--calib-text)
    decoder: Optional[DecoderRecord] = None  # a causal LM with its KV cache as inputs/outputs (generate())

    @property
    def eager(self) -> Callable[..., Any]:
        return self.eager_fn if self.eager_fn is not None else self.module


def sha256_of(path: Path) -> str:
    """Hash of a file, or of every file in a folder (sorted by relative path)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def parse_model_kwargs(text: Optional[str]) -> dict[str, Any]:
    from ....errors import UserInputError

    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserInputError(f"--model-kwargs is not valid JSON ({e})", 'write it like \'{"num_classes": 10}\'') from None
    if not isinstance(value, dict):
        raise UserInputError("--model-kwargs must be a JSON object", 'write it like \'{"num_classes": 10}\'')
    return value
