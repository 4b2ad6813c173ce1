"""Factories for the element-wise ops (each op still has its own file)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import torch
from pydantic import BaseModel, ConfigDict, model_validator

from ..dims import broadcast
from ..opdef import Arity, OpDef, SpecError
from ..spec import TensorSpec
from ._common import like


def unary_op(op_name: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> type[OpDef]:
    class Unary(OpDef):
        name = op_name

        @classmethod
        def infer(cls, inputs, attrs):
            return [like(inputs[0])]

        @classmethod
        def reference(cls, inputs, attrs, dims):
            return fn(inputs[0])

    Unary.__name__ = Unary.__qualname__ = op_name.title() + "Op"
    return Unary


class BinaryAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # A python-number operand is stored here instead of as an input.
    # ints stay ints so integer tensors keep their dtype.
    lhs_scalar: Optional[Union[bool, int, float]] = None
    rhs_scalar: Optional[Union[bool, int, float]] = None

    @model_validator(mode="after")
    def _one_scalar(self) -> "BinaryAttrs":
        if self.lhs_scalar is not None and self.rhs_scalar is not None:
            raise ValueError("lhs_scalar and rhs_scalar are both set (at most one operand is a number)")
        return self


def _operands(inputs: Sequence[Any], attrs: BinaryAttrs) -> tuple[Any, Any]:
    """(lhs, rhs): the tensor input(s), with a scalar attribute on its side."""
    if attrs.lhs_scalar is not None:
        return attrs.lhs_scalar, inputs[0]
    if attrs.rhs_scalar is not None:
        return inputs[0], attrs.rhs_scalar
    return inputs[0], inputs[1]


def _result_dtype(fn: Callable[[Any, Any], torch.Tensor], inputs: Sequence[Optional[TensorSpec]], attrs: BinaryAttrs) -> str:
    """torch's type promotion, scalar operands included (int64 + 0.5 -> float32, int / int -> float32)."""
    from .. import dtypes

    metas = [None if s is None else torch.empty([1] * s.rank, dtype=dtypes.to_torch(s.dtype), device="meta") for s in inputs]
    try:  # torch refuses some pairs (bool - bool) and scalars out of an integer dtype's range
        return dtypes.to_name(fn(*_operands(metas, attrs)).dtype)
    except (RuntimeError, TypeError, ValueError, OverflowError) as e:
        raise SpecError(f"{fn.__name__} of {' and '.join(s.dtype for s in inputs if s is not None)} "
                        f"{'with a scalar ' if len(inputs) == 1 else ''}is refused by torch: {' '.join(str(e).split())[:200]}") from None


def binary_op(op_name: str, fn: Callable[[Any, Any], torch.Tensor]) -> type[OpDef]:
    class Binary(OpDef):
        name = op_name
        Attrs = BinaryAttrs

        @classmethod
        def input_arity(cls, attrs):
            n = 1 if attrs.lhs_scalar is not None or attrs.rhs_scalar is not None else 2
            return Arity(n, n)

        @classmethod
        def infer(cls, inputs, attrs):
            tensors = [s for s in inputs if s is not None]
            try:
                shape = tensors[0].shape if len(tensors) == 1 else broadcast(tensors[0].shape, tensors[1].shape)
            except ValueError as e:
                raise SpecError(str(e)) from None
            out = like(tensors[0], shape, _result_dtype(fn, inputs, attrs))
            if len(tensors) == 2 and tensors[0].shape == tensors[1].shape:
                out = out.with_(memory_format=tensors[0].memory_format)
            elif len(tensors) == 1:
                out = out.with_(memory_format=tensors[0].memory_format)
            return [out]

        @classmethod
        def reference(cls, inputs, attrs, dims):
            a, b = _operands(inputs, attrs)
            return fn(a, b)

    Binary.__name__ = Binary.__qualname__ = op_name.title() + "Op"
    return Binary


def identity_infer(inputs: Sequence[TensorSpec]) -> list[TensorSpec]:
    return [like(inputs[0])]
