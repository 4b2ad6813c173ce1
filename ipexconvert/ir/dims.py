"""Symbolic dimensions.

A shape entry is an int or a string expression over named dims ("batch", "seq",
"batch*seq"). Expressions are compiled once and evaluated against the dims bound
from the actual inputs at run time.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Sequence, Union

import sympy
from sympy.printing.pycode import PythonCodePrinter

Dim = Union[int, str]


# torch.export writes integer division with its own sympy functions.
_SYMPY_LOCALS = {
    "FloorDiv": lambda a, b: sympy.floor(a / b),
    "CleanDiv": lambda a, b: a / b,
    "CeilDiv": lambda a, b: sympy.ceiling(a / b),
    "Mod": sympy.Mod,
    "PythonMod": sympy.Mod,
    "floor": sympy.floor,
}


def parse(expr: str) -> sympy.Expr:
    parsed = sympy.sympify(expr, locals=_SYMPY_LOCALS)
    # Dims are sizes: positive integers. Saying so lets sympy fold e.g. floor(batch*seq) to batch*seq.
    return parsed.xreplace({s: sympy.Symbol(s.name, integer=True, positive=True) for s in parsed.free_symbols})


class _ExactPrinter(PythonCodePrinter):
    """Prints rationals as Fractions, so sizes like floor(w/3 - 1/3) + 1 evaluate exactly (floats would round)."""

    def _print_Rational(self, expr):
        return f"Fraction({expr.p}, {expr.q})"

    _print_Half = _print_Rational


@lru_cache(maxsize=4096)
def _compile(expr: str) -> Callable[[dict[str, int]], int]:
    parsed = parse(expr)
    symbols = sorted(parsed.free_symbols, key=lambda s: s.name)
    names = [s.name for s in symbols]
    fn = sympy.lambdify(symbols, parsed, modules=[{"Fraction": Fraction, "math": math}, "math"], printer=_ExactPrinter)

    def evaluate(bound: dict[str, int]) -> int:
        try:
            return int(fn(*(bound[n] for n in names)))
        except KeyError as missing:
            raise ValueError(f"dimension {missing} is not bound by any input") from None

    return evaluate


def resolve(dim: Dim, bound: dict[str, int]) -> int:
    """The concrete size of one shape entry."""
    if isinstance(dim, int):
        return dim
    return _compile(dim)(bound)


def resolve_shape(shape: Sequence[Dim], bound: dict[str, int]) -> list[int]:
    return [d if isinstance(d, int) else _compile(d)(bound) for d in shape]


def is_static(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


def simplify(dim: Dim) -> Dim:
    """Canonical form: ints stay ints, expressions that fold to a number become ints."""
    if isinstance(dim, int):
        return dim
    expr = parse(dim)
    if expr.is_Integer:
        return int(expr)
    return str(expr)


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return simplify(f"({a})*({b})")


def floordiv(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return simplify(f"floor(({a})/({b}))")


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return simplify(f"({a})+({b})")


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
