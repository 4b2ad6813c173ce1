"""Checkpoint files: a state dict (.safetensors, or .pt/.pth/.bin read with weights_only=True)
plus --model-factory, or a whole pickled nn.Module (refused without --trust-pickle).
"""
from __future__ import annotations

import pickle
from pathlib import Path

import torch

from ....importing import import_callable
from ....errors import UnsafeCheckpointError, UserInputError
from ....manifest import SourceRecord
from .base import ResolvedSource, SourceRequest, sha256_of

SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
PICKLE_RISK = ("{path} holds a pickled Python object (a whole nn.Module, not just tensors). Loading it runs "
               "arbitrary code from the file, so ipexconvert refuses it by default")


def matches(request: SourceRequest) -> bool:
    return request.location.endswith(SUFFIXES)


def _build_from_factory(spec: str, kwargs: dict) -> torch.nn.Module:
    fn = import_callable(spec, "--model-factory")
    try:
        model = fn(**kwargs)
    except TypeError as e:
        raise UserInputError(f"{spec}(**model_kwargs) failed: {e}", "check --model-kwargs against the factory's arguments") from None
    if not isinstance(model, torch.nn.Module):
        raise UserInputError(f"{spec} returned {type(model).__name__}, not an nn.Module", "return the model from the factory")
    return model


def _read_state_dict(path: Path) -> dict[str, torch.Tensor] | None:
    """The tensors in the file, or None if it needs pickle beyond plain tensors."""
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except (SafetensorError, OSError) as e:
            raise UserInputError(f"{path} is not a readable safetensors file ({e})", "check that the file is complete") from None
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        return None  # needs full pickle: a whole module or other Python objects
    except (RuntimeError, EOFError, OSError) as e:
        raise UserInputError(f"{path} is not a readable PyTorch checkpoint ({e})", "check that the file is complete") from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]  # common training-checkpoint layout
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise UserInputError(f"{path} does not hold a state dict (name -> tensor)", "save model.state_dict()")
    return obj


def load(request: SourceRequest) -> ResolvedSource:
    path = Path(request.location)
    if not path.is_file():
        raise UserInputError(f"{path} does not exist", "check the checkpoint path")
    record = SourceRecord(kind="state-dict", location=str(path), sha256=sha256_of(path))
    state = _read_state_dict(path)
    if state is None:
        if not request.trust_pickle:
            raise UnsafeCheckpointError(PICKLE_RISK.format(path=path),
                                        "re-save only the weights (torch.save(model.state_dict(), ...) or safetensors) and pass "
                                        "--model-factory; or, if you trust whoever made this file, pass --trust-pickle")
        module = torch.load(str(path), map_location="cpu", weights_only=False)
        if not isinstance(module, torch.nn.Module):
            raise UserInputError(f"{path} holds a {type(module).__name__}, not an nn.Module", "save the model with torch.save(model)")
        return ResolvedSource(record=record.model_copy(update={"kind": "pickle"}), module=module.eval())
    if request.model_factory is None:
        raise UserInputError(f"{path} holds only weights ({len(state)} tensors); ipexconvert needs the code that builds the model",
                             "pass --model-factory package.module:function (and --model-kwargs JSON if it takes arguments)")
    module = _build_from_factory(request.model_factory, request.model_kwargs)
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as e:  # strict=False still raises on shape mismatches
        detail = " ".join(str(e).split())
        raise UserInputError(f"{path} does not fit the model from {request.model_factory}: {detail[:300]}",
                             "check --model-factory and --model-kwargs build the same architecture") from None
    if missing or unexpected:
        raise UserInputError(f"{path} does not fit the model from {request.model_factory}: "
                             f"missing {list(missing)[:5]}, unexpected {list(unexpected)[:5]}",
                             "check --model-factory and --model-kwargs build the same architecture")
    return ResolvedSource(record=record, module=module.eval())
