"""aten: fallback node that calls one core ATen op.

Only ops tagged `core` by PyTorch (plus a short list below) may appear, and never
ones that mutate inputs or draw random numbers: an artifact can name no
arbitrary code. Arguments are stored as JSON with tagged objects for tensors
(`$in`), symbolic ints (`$sym`), dtypes, devices, layouts and memory formats.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from pydantic import BaseModel, ConfigDict, Field

from .. import dtypes
from ..dims import resolve
from ..opdef import OpDef, register_op

# Non-core ATen ops that are still pure and safe to run, and that torch's default
# decomposition table leaves in place (F.normalize lowers to linalg_vector_norm).
EXTRA_ALLOWED = {"aten.scalar_tensor.default", "aten.linalg_vector_norm.default"}

_MEMORY_FORMATS = {
    "contiguous_format": torch.contiguous_format,
    "channels_last": torch.channels_last,
    "preserve_format": torch.preserve_format,
}
_LAYOUTS = {"strided": torch.strided}


class AtenAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: str = Field(description="e.g. aten.arange.start")
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)


def resolve_target(target: str) -> torch._ops.OpOverload:
    parts = target.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise ValueError(f"{target!r} is not an ATen op name")
    packet = getattr(torch.ops.aten, parts[1], None)
    overload = getattr(packet, parts[2], None) if packet is not None else None
    if overload is None:
        raise ValueError(f"{target} does not exist in this PyTorch ({torch.__version__})")
    return overload


def refusal_reason(target: str) -> str | None:
    """Why this ATen op may not appear in an artifact, or None if it may."""
    try:
        op = resolve_target(target)
    except ValueError as e:
        return str(e)
    if op._schema.is_mutable:
        return "it mutates its inputs"
    if torch.Tag.nondeterministic_seeded in op.tags:
        return "it draws random numbers"
    if torch.Tag.core not in op.tags and target not in EXTRA_ALLOWED:
        return "it is not a core ATen op"
    return None


def encode_arg(value: Any, tensor_index: Callable[[Any], int], symbolic: Callable[[Any], Any]) -> Any:
    """Python/fx argument -> JSON. tensor_index maps a tensor-valued fx node to its input slot."""
    if isinstance(value, (list, tuple)):
        return [encode_arg(v, tensor_index, symbolic) for v in value]
    if hasattr(value, "meta"):  # an fx node
        sym = symbolic(value)
        if sym is not None:
            return sym if isinstance(sym, int) else {"$sym": sym}
        return {"$in": tensor_index(value)}
    if isinstance(value, torch.dtype):
        return {"$dtype": dtypes.to_name(value)}
    if isinstance(value, torch.device):
        return {"$device": value.type}
    if isinstance(value, torch.layout):
        return {"$layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"$memory_format": str(value).removeprefix("torch.")}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store argument of type {type(value).__name__}")


def _decoder(value: Any) -> Callable[[list, dict], Any]:
    """Build once, call per run: JSON argument -> live value."""
    if isinstance(value, list):
        parts = [_decoder(v) for v in value]
        return lambda ins, dims: [p(ins, dims) for p in parts]
    if isinstance(value, dict):
        (tag, payload), = value.items()
        if tag == "$in":
            return lambda ins, dims: ins[payload]
        if tag == "$sym":
            return lambda ins, dims: resolve(payload, dims)
        constant = {
            "$dtype": lambda: dtypes.to_torch(payload),
            "$device": lambda: torch.device("cpu"),  # the executor's device
            "$layout": lambda: _LAYOUTS[payload],
            "$memory_format": lambda: _MEMORY_FORMATS[payload],
            "$float": lambda: float(payload),
        }[tag]()
        return lambda ins, dims: constant
    return lambda ins, dims: value


@register_op
class AtenOp(OpDef):
    name = "aten"
    Attrs = AtenAttrs

    @classmethod
    def compile(cls, attrs: AtenAttrs):
        reason = refusal_reason(attrs.target)
        if reason is not None:
            raise ValueError(f"artifact names {attrs.target}, which is refused: {reason}")
        op = resolve_target(attrs.target)
        args = _decoder(attrs.args)
        kwargs = {k: _decoder(v) for k, v in attrs.kwargs.items()}

        def run(inputs, dims):
            return op(*args(inputs, dims), **{k: f(inputs, dims) for k, f in kwargs.items()})

        return run

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return cls.compile(attrs)(inputs, dims)

    @classmethod
    def infer(cls, inputs, attrs):
        """Run the op on meta tensors (static shapes only)."""
        from ..dims import is_static
        from ..spec import TensorSpec

        if not all(s is None or is_static(s.shape) for s in inputs) or '"$sym"' in attrs.model_dump_json():
            raise NotImplementedError("aten shape rule needs static shapes")
        metas = [None if s is None else torch.empty(s.shape, dtype=dtypes.to_torch(s.dtype), device="meta").contiguous(
            memory_format=_MEMORY_FORMATS["channels_last" if s.memory_format == "channels_last" else "contiguous_format"])
            for s in inputs]
        out = cls.compile(attrs)(metas, {})
        outs = out if isinstance(out, (tuple, list)) else [out]
        return [TensorSpec.of(o) for o in outs]
