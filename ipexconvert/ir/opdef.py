"""Op definitions and the opset registry.

Every op in the IR is one OpDef subclass in its own file under ir/ops/. An OpDef
knows its typed attributes, the inputs it reads, its shape/dtype rule, and its
reference implementation in plain torch (the test oracle and the run-time fallback).
It is frontend-neutral: which calls of a source format become which op is each
frontend's own table (frontend/torch/aten_map/ for torch.export).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Sequence

import torch
from pydantic import BaseModel, ConfigDict

from .spec import TensorSpec


class NoAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpecError(ValueError):
    """Raised by a shape rule (OpDef.infer) when the input specs cannot be this op's inputs
    (a weight of the wrong shape, ranks or dtypes the op does not take, shapes that do not broadcast)."""


@dataclass(frozen=True)
class Arity:
    """The inputs a node of an op reads: `min`..`max` of its own (max None: any number; the positions in
    `optional` may be None, e.g. a missing bias), then, for ops with post-ops (post_op_operands), one more
    per binary post-op operand after all `max` of its own."""

    min: int
    max: Optional[int]
    optional: frozenset[int] = frozenset()
    post_op_operands: bool = False


class OpDef:
    name: ClassVar[str]
    Attrs: ClassVar[type[BaseModel]] = NoAttrs
    arity: ClassVar[Arity] = Arity(1, 1)
    # Made by the runtime at load (e.g. runtime/static_cache.py), never written in an artifact: the loader
    # refuses an artifact holding one (their kernels trust what the runtime guarantees, e.g. a write position).
    internal: ClassVar[bool] = False
    # The loader checks this op's shape rule at one sample point of the dims only (ir/validate.py: aten runs on meta
    # tensors and needs sizes): the executor checks such a node's outputs against their declared shapes on every
    # call whose shapes the sample did not fix (runtime/executor.py, declared_shapes).
    shapes_sampled: ClassVar[bool] = False

    # ---- semantics -----------------------------------------------------
    @classmethod
    def parse_attrs(cls, attrs: dict[str, Any]) -> BaseModel:
        return cls.Attrs.model_validate(attrs)

    @classmethod
    def made_at_load(cls, attrs: Any) -> bool:
        """Whether a node of this op with these attrs is made by the runtime at load only (the loader refuses it in an
        artifact): every internal op's node, and some attrs of stored ops (woq_linear's bf16 weights)."""
        return cls.internal

    @classmethod
    def input_arity(cls, attrs: Any) -> Arity:
        """The inputs a node with these attrs reads (checked at load, before any kernel sees the node)."""
        return cls.arity

    @classmethod
    def infer(cls, inputs: Sequence[Optional[TensorSpec]], attrs: Any) -> list[TensorSpec]:
        """The output specs for these input specs. Raises SpecError when the inputs cannot be this op's
        (the loader refuses such nodes), NotImplementedError when it cannot tell (e.g. symbolic sizes)."""
        raise NotImplementedError(f"{cls.name} has no shape rule")

    @classmethod
    def reference(cls, inputs: Sequence[Optional[torch.Tensor]], attrs: Any, dims: dict[str, int]):
        raise NotImplementedError(cls.name)

    @classmethod
    def compile(cls, attrs: Any) -> Callable[[list, dict[str, int]], Any]:
        """A callable(inputs, dims) for the executor; resolve per-node work here, once."""
        return lambda inputs, dims: cls.reference(inputs, attrs, dims)


OPSET: dict[str, type[OpDef]] = {}


def register_op(cls: type[OpDef]) -> type[OpDef]:
    if cls.name in OPSET:
        raise RuntimeError(f"op {cls.name} registered twice")
    OPSET[cls.name] = cls
    return cls


def get_op(name: str) -> type[OpDef]:
    try:
        return OPSET[name]
    except KeyError:
        raise KeyError(f"op {name!r} is not in the opset") from None
