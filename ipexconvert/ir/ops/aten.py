"""aten: fallback node that calls one ATen op.

Only the ops listed in aten_allowlist.ALLOWED may appear (forward ops the frontend emits; never
ones that mutate inputs, draw random numbers, or index memory with caller-supplied offsets), and
each call runs the op's argument check first: sizes, indices and an output budget. The frontend
and the loader decide with the same function, refusal_reason. Arguments are stored as JSON with
tagged objects for tensors (`$in`), symbolic ints (`$sym`), dtypes, devices, layouts and memory
formats.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...errors import ArtifactError, IpexConvertError
from .. import dtypes
from ..dims import check, resolve_int, resolve_shape
from ..opdef import Arity, OpDef, register_op
from .aten_allowlist import ALLOWED, Refused, max_tensor_bytes

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

    @field_validator("args", "kwargs")
    @classmethod
    def _check_symbolic_ints(cls, value):
        _check_syms(value)
        return value


def _check_syms(value: Any) -> None:
    """Every {"$sym": ...} must hold a dim expression of our grammar (artifacts are untrusted)."""
    if isinstance(value, dict) and "$sym" in value:
        check(value["$sym"])
    for item in value.values() if isinstance(value, dict) else value:
        if isinstance(item, (list, dict)):
            _check_syms(item)


def resolve_target(target: str) -> torch._ops.OpOverload:
    parts = target.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise ValueError(f"{target!r} is not an ATen op name")
    packet = getattr(torch.ops.aten, parts[1], None)
    overload = getattr(packet, parts[2], None) if isinstance(packet, torch._ops.OpOverloadPacket) else None
    if not isinstance(overload, torch._ops.OpOverload):
        raise ValueError(f"{target} does not exist in this PyTorch ({torch.__version__})")
    return overload


def refusal_reason(target: str) -> str | None:
    """Why this ATen op may not appear in an artifact (the frontend's and the loader's one rule), or None
    if it may: only targets on the allow-list, whatever else is true of them."""
    try:
        op = resolve_target(target)
    except ValueError as e:
        return str(e)
    if op._schema.is_mutable:  # never listed; said first because it is the clearest reason
        return "it mutates its inputs"
    if torch.Tag.nondeterministic_seeded in op.tags:
        return "it draws random numbers"
    if target in ALLOWED:
        return None
    if torch.Tag.core not in op.tags:
        return "it is not a core ATen op"
    return "it is not on the list of ATen ops ipexconvert runs (ipexconvert/ir/ops/aten_allowlist.py)"


def _argument_names(op: torch._ops.OpOverload, attrs: AtenAttrs) -> list[str]:
    """The schema names of the positional arguments; refuses a call torch could not bind."""
    schema = op._schema.arguments
    positional = [a.name for a in schema if not a.kwarg_only]
    if len(attrs.args) > len(positional):
        raise ValueError(f"{attrs.target} takes {len(positional)} positional arguments, the node gives {len(attrs.args)}")
    given = set(positional[:len(attrs.args)])
    for name in attrs.kwargs:
        if name not in {a.name for a in schema} or name in given:
            raise ValueError(f"{attrs.target} has no argument {name!r} to give by keyword")
    missing = [a.name for a in schema if a.name not in given and a.name not in attrs.kwargs and not a.has_default_value()]
    if missing:
        raise ValueError(f"{attrs.target} needs argument(s) {', '.join(missing)}, which the node does not give")
    return positional


def _mentions_runtime_values(value: Any) -> bool:
    """True if an argument holds a tensor input or a symbolic int (known only per call)."""
    if isinstance(value, dict):
        return "$in" in value or "$sym" in value
    if isinstance(value, list):
        return any(_mentions_runtime_values(v) for v in value)
    return False


def _decoder(value: Any, device: torch.device) -> Callable[[list, dict], Any]:
    """Build once, call per run: JSON argument -> live value (`$device` is the executor's device)."""
    if isinstance(value, list):
        parts = [_decoder(v, device) for v in value]
        return lambda ins, dims: [p(ins, dims) for p in parts]
    if isinstance(value, dict):
        (tag, payload), = value.items()
        if tag == "$in":
            return lambda ins, dims: ins[payload]
        if tag == "$sym":  # a symbolic int (AtenAttrs checked its expression); it may be negative
            return lambda ins, dims: resolve_int(payload, dims)
        constant = {
            "$dtype": lambda: dtypes.to_torch(payload),
            "$device": lambda: device,
            "$layout": lambda: _LAYOUTS[payload],
            "$memory_format": lambda: _MEMORY_FORMATS[payload],
            "$float": lambda: float(payload),
        }[tag]()
        return lambda ins, dims: constant
    return lambda ins, dims: value


def _input_slots(value: Any) -> set[int]:
    """The node inputs an argument reads ({"$in": i} anywhere in it)."""
    if isinstance(value, dict):
        if set(value) == {"$in"} and type(value["$in"]) is int:
            return {value["$in"]}
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(_input_slots(v) for v in value))
    return set()


@register_op
class AtenOp(OpDef):
    name = "aten"
    Attrs = AtenAttrs
    shapes_sampled = True

    @classmethod
    def input_arity(cls, attrs: AtenAttrs) -> Arity:
        """As many inputs as the arguments read: input i is read by a `{"$in": i}` (none left over)."""
        n = 1 + max(_input_slots([attrs.args, attrs.kwargs]), default=-1)
        return Arity(n, n)

    @classmethod
    def compile(cls, attrs: AtenAttrs, device: str = "cpu"):
        """device: where the op's `device=` arguments put new tensors (the executor's device)."""
        reason = refusal_reason(attrs.target)
        if reason is not None:
            raise ValueError(f"artifact names {attrs.target}, which is refused: {reason}")
        op = resolve_target(attrs.target)
        names = _argument_names(op, attrs)
        arg_check = ALLOWED[attrs.target]
        budget = max_tensor_bytes()
        args = _decoder(attrs.args, torch.device(device))
        kwargs = {k: _decoder(v, torch.device(device)) for k, v in attrs.kwargs.items()}

        def run(inputs, dims):
            a = args(inputs, dims)
            kw = {k: f(inputs, dims) for k, f in kwargs.items()}
            try:
                if arg_check is not None:
                    arg_check({**dict(zip(names, a)), **kw}, budget)
                return op(*a, **kw)
            except Refused as e:
                raise e.error(attrs.target, budget) from None
            except IpexConvertError:
                raise
            except (RuntimeError, TypeError, ValueError, IndexError, ArithmeticError) as e:
                # torch refusing the arguments: the artifact's doing (the inputs were checked against its signature)
                raise ArtifactError(f"{attrs.target} failed: {' '.join(str(e).split())[:300]}",
                                    "re-create the artifact with `ipexconvert optimize`; if it was just made, "
                                    "report this with the model") from None

        if arg_check is not None and not _mentions_runtime_values([attrs.args, list(attrs.kwargs.values())]):
            try:  # constant arguments (a `full` of fixed size): refuse at load, not on the first call
                arg_check({**dict(zip(names, args([], {}))), **{k: f([], {}) for k, f in kwargs.items()}}, budget)
            except Refused as e:
                raise ValueError(e.error(attrs.target, budget).problem) from None
            except (TypeError, ArithmeticError, IndexError) as e:  # a check meeting a value it did not foresee
                raise ValueError(f"{attrs.target}: arguments refused ({e})") from None
        return run

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return cls.compile(attrs)(inputs, dims)

    @classmethod
    def infer(cls, inputs, attrs, dims: dict[str, int] | None = None):
        """Run the op on meta tensors, with its argument check: static shapes, or, given `dims`, every
        symbolic size and `$sym` argument evaluated at those dims (the result is then that point's, with ints)."""
        from ..dims import is_static
        from ..spec import TensorSpec

        if dims is None and (not all(s is None or is_static(s.shape) for s in inputs) or '"$sym"' in attrs.model_dump_json()):
            raise NotImplementedError("aten shape rule needs static shapes")
        metas = [None if s is None else torch.empty(resolve_shape(s.shape, dims or {}), dtype=dtypes.to_torch(s.dtype),
                                                    device="meta").contiguous(
            memory_format=_MEMORY_FORMATS["channels_last" if s.memory_format == "channels_last" else "contiguous_format"])
            for s in inputs]
        out = cls.compile(attrs)(metas, dims or {})
        outs = out if isinstance(out, (tuple, list)) else [out]
        return [TensorSpec.of(o) for o in outs]
