"""Symbolic dimensions.

A shape entry is an int or a string expression over named dims ("batch", "seq",
"batch*seq"). Strings are parsed by our own grammar (dim_expr.py), never by sympify
or eval: they come from artifacts. The parsed tree becomes sympy objects for the
symbolic work (simplify, same, mul, ...) and an exact evaluator for run-time sizes.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Sequence, Union

import sympy
from pydantic import AfterValidator

from . import dim_sympy
from .dim_expr import DimEvalError, DimExprError, compile_int, parse
from .dim_sympy import to_sympy

__all__ = ["Dim", "DimEntry", "DimEvalError", "DimExprError", "check", "resolve", "resolve_int", "resolve_shape",
           "is_static", "simplify", "mul", "floordiv", "add", "same", "broadcast", "numel"]

Dim = Union[int, str]


def check(dim: Dim) -> Dim:
    """The dim itself if it is an int or an expression in the grammar; DimExprError otherwise."""
    if isinstance(dim, str):
        parse(dim)
    elif type(dim) is not int:
        raise DimExprError(f"shape entry {dim!r} is neither an integer nor a dim expression")
    return dim


# A shape entry in a pydantic model: expressions are checked when an artifact is read.
DimEntry = Annotated[Union[int, str], AfterValidator(check)]


# ---- sympy, for symbolic reasoning ------------------------------------------
_NOT_FINITE = (sympy.zoo, sympy.nan, sympy.oo, -sympy.oo)


@lru_cache(maxsize=4096)
def _sympy_of(dim: Dim) -> sympy.Expr:
    if isinstance(dim, int):
        return sympy.Integer(dim)
    tree = parse(dim)
    try:
        expr = to_sympy(tree)
    except (ArithmeticError, ValueError, TypeError):  # Mod by zero, Max of an infinity, ...
        expr = sympy.zoo
    if expr.has(*_NOT_FINITE):
        raise DimExprError(f"dim expression {dim!r} is refused: it divides by zero")
    return expr


# Strings this module printed from sympy objects it built, and those objects: intermediate
# results (numel of a long shape) may be longer than the grammar allows a stored entry to be,
# and are read back from here instead of being parsed. Only our own output gets in.
_PRINTED: dict[str, sympy.Expr] = {}
_PRINTED_LIMIT = 8192


def _canonical(expr: sympy.Expr) -> Dim:
    """ints stay ints, expressions that fold to a number become ints, the rest sympy's string."""
    if expr.has(*_NOT_FINITE):
        raise DimExprError(f"dim arithmetic divides by zero ({expr})")
    if expr.is_Integer:
        return int(expr)
    text = str(expr)
    if len(_PRINTED) >= _PRINTED_LIMIT:
        _PRINTED.clear()
    _PRINTED[text] = expr
    return text


def parse_sympy(dim: Dim) -> sympy.Expr:
    """The sympy form of a shape entry (for symbolic reasoning only; built, not sympified)."""
    printed = _PRINTED.get(dim) if isinstance(dim, str) else None
    return printed if printed is not None else _sympy_of(check(dim))


# ---- evaluation -------------------------------------------------------------
def resolve(dim: Dim, bound: dict[str, int]) -> int:
    """The concrete size of one shape entry. ValueError if it names a dim no input binds;
    DimEvalError (a UserInputError) if these dims give it no size (negative, division by zero)."""
    if isinstance(dim, int):
        return dim
    return compile_int(dim)(bound)


def resolve_int(dim: Dim, bound: dict[str, int]) -> int:
    """Like resolve, for a symbolic integer argument (an aten `$sym`), which may be negative."""
    if isinstance(dim, int):
        return dim
    return compile_int(dim, signed=True)(bound)


def resolve_shape(shape: Sequence[Dim], bound: dict[str, int]) -> list[int]:
    return [d if isinstance(d, int) else compile_int(d)(bound) for d in shape]


def is_static(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


# ---- symbolic arithmetic ----------------------------------------------------
def simplify(dim: Dim) -> Dim:
    """Canonical form: ints stay ints, expressions that fold to a number become ints."""
    if isinstance(dim, int):
        return dim
    return _canonical(parse_sympy(dim))


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return _canonical(parse_sympy(a) * parse_sympy(b))


def floordiv(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return _canonical(dim_sympy.floordiv(parse_sympy(a), parse_sympy(b)))


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return _canonical(parse_sympy(a) + parse_sympy(b))


def same(a: Dim, b: Dim) -> bool:
    return simplify(a) == simplify(b)


def broadcast(a: Sequence[Dim], b: Sequence[Dim]) -> list[Dim]:
    """numpy broadcasting over symbolic shapes."""
    out: list[Dim] = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da == 1:
            out.append(db)
        elif db == 1 or same(da, db):
            out.append(da)
        else:
            raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast")
    return out[::-1]


def numel(shape: Sequence[Dim]) -> Dim:
    total: Dim = 1
    for d in shape:
        total = mul(total, d)
    return total
