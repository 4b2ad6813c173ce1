"""Parsed dim expressions (dim_expr.Expr) as sympy objects, for symbolic reasoning.

The objects are built directly, never sympified from text. + - * / and ** are sympy's own
(their canonical forms are cheap: sympy does not expand products or powers on its own). floor,
ceiling, Mod, Min and Max are small functions of our own: sympy's versions query assumptions and
try polynomial algebra when they are created, which takes seconds on a few crafted lines
(Mod((a+b)**8, (b+c)**8) nested three deep), and an artifact can hold many of them. Ours fold
only what dims need, structurally: floor/ceiling of an integer expression is itself (floor(batch*seq)
is batch*seq), integer terms move out of floor/ceiling (floor(w/2 + 1) is floor(w/2) + 1),
numbers fold, and Min/Max flatten, drop duplicates and sort their arguments.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import sympy
from sympy.core.sorting import default_sort_key

from .dim_expr import OPS, Expr


def is_whole(e: sympy.Expr) -> bool:
    """Structurally an integer, given integer dims (no assumption queries)."""
    if e.is_Integer or e.is_Symbol or isinstance(e, _IntegerFunction):
        return True
    if isinstance(e, (sympy.Add, sympy.Mul)):
        return all(is_whole(a) for a in e.args)
    if isinstance(e, sympy.Pow):
        return e.exp.is_Integer and e.exp >= 0 and is_whole(e.base)
    return isinstance(e, (Mod, Min, Max)) and all(is_whole(a) for a in e.args)


class _Printed(sympy.Function):
    """Prints as NAME(args), NAME being the function's name in the dim grammar."""

    grammar_name = ""

    def _sympystr(self, printer) -> str:
        return f"{self.grammar_name}({', '.join(printer.doprint(a) for a in self.args)})"


class _IntegerFunction(_Printed):
    """floor and ceiling: always integers."""

    nargs = 1
    is_integer = True
    rounding: Callable = math.floor

    @classmethod
    def eval(cls, x):
        if x.is_Rational:
            return sympy.Integer(cls.rounding(Fraction(int(x.p), int(x.q))))
        if is_whole(x):
            return x
        if isinstance(x, sympy.Add):
            whole = [t for t in x.args if is_whole(t)]
            if whole:
                return sympy.Add(*whole) + cls(sympy.Add(*[t for t in x.args if not is_whole(t)]))
        return None


class Floor(_IntegerFunction):
    grammar_name = "floor"
    rounding = math.floor


class Ceiling(_IntegerFunction):
    grammar_name = "ceiling"
    rounding = math.ceil


class Mod(_Printed):
    grammar_name = "Mod"
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if b == 0:
            raise ZeroDivisionError("Mod by zero")
        if a.is_Rational and b.is_Rational:
            return sympy.Rational(a) % sympy.Rational(b)
        if a == 0 or (b == 1 and is_whole(a)):
            return sympy.Integer(0)
        return None


class _Lattice(_Printed):
    """Min/Max: flattened, numbers folded into one, duplicates dropped, arguments sorted."""

    pick: Callable = min

    @classmethod
    def eval(cls, *args):
        flat: list = []
        for a in args:
            flat.extend(a.args if isinstance(a, cls) else [a])
        numbers = [a for a in flat if a.is_Rational]
        rest = sorted(set(a for a in flat if not a.is_Rational), key=default_sort_key)
        if numbers:
            rest.insert(0, cls.pick(numbers))
        if len(rest) == 1:
            return rest[0]
        if tuple(rest) != args:
            return cls(*rest, evaluate=False)
        return None


class Min(_Lattice):
    grammar_name = "Min"
    pick = min


class Max(_Lattice):
    grammar_name = "Max"
    pick = max


def floordiv(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    return Floor(a / b)


SYMPY: dict[str, Callable] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "neg": lambda a: -a,
    "pow": lambda a, k: a ** k,
    "floordiv": floordiv,
    "ceildiv": lambda a, b: Ceiling(a / b),
    "mod": Mod,
    "floor": Floor,
    "ceiling": Ceiling,
    "min": Min,
    "max": Max,
}
assert set(SYMPY) == set(OPS), "every op of the grammar needs its sympy form"


def symbol(name: str) -> sympy.Symbol:
    # Dims are sizes: positive integers.
    return sympy.Symbol(name, integer=True, positive=True)


def to_sympy(expr: Expr) -> sympy.Expr:
    if expr.op == "int":
        return sympy.Integer(expr.value)
    if expr.op == "name":
        return symbol(expr.value)
    return SYMPY[expr.op](*(to_sympy(a) for a in expr.args))
