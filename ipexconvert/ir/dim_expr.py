"""Dim expressions: a small grammar of our own, parsed without running any code.

Shape entries such as "batch*seq" or "floor(w/2 - 1/2) + 1" come from artifacts, which are
untrusted data, so they never reach sympify, eval or lambdify. Python's `ast` module only
tokenizes and parses (ast.parse runs nothing); a walk with an explicit whitelist turns the tree
into our own `Expr` nodes, from which dims.py builds sympy objects (simplify, same) and this
module builds a plain evaluator (exact int/Fraction arithmetic) for run-time sizes.

The grammar: dim names (ASCII identifiers), non-negative integer literals, + - * // %,
** with a small literal exponent, unary minus, parentheses, the functions in FUNCTIONS
(torch.export's FloorDiv/CeilDiv/CleanDiv/Mod/PythonMod/FloorToInt/CeilToInt, floor/ceiling,
Min/Max), and `/` (or IntTrueDiv) only inside floor/ceiling, where sympy prints exact rationals
(floor(w/3 - 1/3) + 1).

Every expression is also bounded: a length and nesting cap, and an upper bound on the size (in
bits) of every intermediate value, assuming each dim is below 2**63 (a tensor size), so no
expression can make the evaluator or sympy do unbounded work (9**9**9**9 is refused when parsed).
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Union

from ..errors import UserInputError

MAX_LENGTH = 1024  # characters: torch prints a size after n strided layers in about 25n (h*w: twice that)
MAX_DEPTH = 64  # nesting of operators, calls and parentheses (about 3 per strided layer)
MAX_EXPONENT = 8  # sympy prints batch*batch as batch**2
MAX_LITERAL_BITS = 64
DIM_BITS = 63  # a bound dim is a tensor size: below 2**63
MAX_BITS = 1024  # of any intermediate numerator or denominator: evaluation stays cheap
MAX_SIZE = 2**62  # the largest size (or |value| of a symbolic argument) an expression may evaluate to

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ALLOWED_CHARS = re.compile(r"[A-Za-z0-9_+\-*/%(), ]*\Z")  # no quotes, dots, brackets, colons, newlines

Number = Union[int, Fraction]


class DimExprError(ValueError):
    """A dim expression outside the grammar or its bounds (the caller names where it came from)."""


class DimEvalError(UserInputError):
    """A valid expression that has no size for the dims the inputs bind: division by zero, a
    negative, fractional or too large value. The inputs' sizes are what the user can change."""

    def __init__(self, problem: str, fix: str | None = None):
        super().__init__(problem, fix or "call the model with input sizes inside the ranges it was converted for "
                                         "(`ipexconvert inspect MODEL` lists them)")


# ---- the tree ---------------------------------------------------------------
@dataclass(frozen=True)
class Expr:
    """op: "int" (value: the literal), "name" (value: the dim) or a key of OPS (args: operands)."""

    op: str
    args: tuple["Expr", ...] = ()
    value: Union[int, str, None] = None
    num_bits: int = 0  # upper bounds on the bits of |numerator| and denominator of any value it takes
    den_bits: int = 0

    def names(self) -> set[str]:
        """The dim names it reads."""
        if self.op == "name":
            return {self.value}
        return set().union(*(a.names() for a in self.args))


@dataclass(frozen=True)
class Op:
    """One operator: how to evaluate it exactly and how to bound the size of its result."""

    arity: tuple[int, int]  # min, max number of operands
    evaluate: Callable[..., Number]
    bits: Callable[..., tuple[int, int]]  # (num_bits, den_bits) of the operands -> of the result
    rational: bool = False  # its operands may use `/` (floor/ceiling)


def _nonzero(b: Number) -> Number:
    if b == 0:
        raise ZeroDivisionError
    return b


def _floordiv(a: Number, b: Number) -> int:
    return a // _nonzero(b)  # exact for ints and Fractions alike


def _bits_sum(a, b):
    return max(a[0] + b[1], b[0] + a[1]) + 1, a[1] + b[1]


def _bits_div(a, b):
    return a[0] + b[1], a[1] + b[0]


def _bits_floordiv(a, b):
    return _bits_div(a, b)[0] + 1, 0


OPS: dict[str, Op] = {
    "add": Op((2, 2), lambda a, b: a + b, _bits_sum),
    "sub": Op((2, 2), lambda a, b: a - b, _bits_sum),
    "mul": Op((2, 2), lambda a, b: a * b, lambda a, b: (a[0] + b[0], a[1] + b[1])),
    "div": Op((2, 2), lambda a, b: Fraction(a) / _nonzero(b), _bits_div),
    "neg": Op((1, 1), lambda a: -a, lambda a: a),
    "pow": Op((2, 2), lambda a, k: a ** k, None),  # its bits need the literal exponent: _Walker.make
    "floordiv": Op((2, 2), _floordiv, _bits_floordiv),
    "ceildiv": Op((2, 2), lambda a, b: -_floordiv(-a, b), _bits_floordiv),
    "mod": Op((2, 2), lambda a, b: a % _nonzero(b), lambda a, b: (b[0] + a[1], a[1] + b[1])),
    "floor": Op((1, 1), math.floor, lambda a: (a[0] + 1, 0), rational=True),
    "ceiling": Op((1, 1), math.ceil, lambda a: (a[0] + 1, 0), rational=True),
    "min": Op((1, 16), lambda *a: min(a), lambda *a: (max(x[0] for x in a), max(x[1] for x in a))),
    "max": Op((1, 16), lambda *a: max(a), lambda *a: (max(x[0] for x in a), max(x[1] for x in a))),
}

# Function names an expression may call -> the op. torch.export's integer functions are here
# because the frontend prints its sympy expressions; CleanDiv divides exactly, so floor division.
FUNCTIONS: dict[str, str] = {
    "floor": "floor", "FloorToInt": "floor", "ceiling": "ceiling", "CeilToInt": "ceiling",
    "FloorDiv": "floordiv", "CleanDiv": "floordiv", "CeilDiv": "ceildiv",
    "Mod": "mod", "PythonMod": "mod",
    "Min": "min", "Max": "max", "min": "min", "max": "max",
    "IntTrueDiv": "div",  # CeilToInt(IntTrueDiv(s, 2)): math.ceil(s / 2) in a model
}

_BINOPS: dict[type, str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow",
}


# ---- parsing ----------------------------------------------------------------
def _refuse(text: str, why: str) -> DimExprError:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return DimExprError(f"dim expression {shown!r} is refused: {why}")


def parse(text: str) -> Expr:
    """The expression tree of `text`, or DimExprError. Never evaluates anything."""
    if not isinstance(text, str):
        raise DimExprError(f"dim expression {str(text)[:80]!r} is not a string")
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> Expr:
    if len(text) > MAX_LENGTH:
        raise _refuse(text, f"longer than {MAX_LENGTH} characters")
    if not _ALLOWED_CHARS.match(text):
        raise _refuse(text, "only dim names, integers, + - * / // % **, parentheses and commas may appear")
    depth = 0
    for ch in text:  # before ast.parse, so its parser never sees deep nesting
        depth += (ch == "(") - (ch == ")")
        if depth > MAX_DEPTH:
            raise _refuse(text, f"nested deeper than {MAX_DEPTH}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise _refuse(text, f"not an expression ({type(e).__name__})") from None
    return _Walker(text).walk(tree.body, 0, False)


class _Walker:
    def __init__(self, text: str):
        self.text = text

    def refuse(self, why: str) -> DimExprError:
        return _refuse(self.text, why)

    def walk(self, node: ast.AST, depth: int, rational: bool) -> Expr:
        if depth > MAX_DEPTH:
            raise self.refuse(f"nested deeper than {MAX_DEPTH}")
        handler = self.HANDLERS.get(type(node))
        if handler is None:
            raise self.refuse(f"{type(node).__name__} is not part of the dim grammar")
        return handler(self, node, depth + 1, rational)

    def constant(self, node: ast.Constant, depth: int, rational: bool) -> Expr:
        value = node.value
        if type(value) is not int:  # bool is an int subclass: refused too, as are floats and strings
            raise self.refuse(f"the literal {value!r} is not a non-negative integer")
        if value.bit_length() > MAX_LITERAL_BITS:
            raise self.refuse(f"the literal {value} is too large")
        return Expr("int", value=value, num_bits=max(value.bit_length(), 1))

    def name(self, node: ast.Name, depth: int, rational: bool) -> Expr:
        if not _NAME.match(node.id):
            raise self.refuse(f"{node.id!r} is not a dim name")
        return Expr("name", value=node.id, num_bits=DIM_BITS)

    def unary(self, node: ast.UnaryOp, depth: int, rational: bool) -> Expr:
        operand = self.walk(node.operand, depth, rational)
        if isinstance(node.op, ast.UAdd):
            return operand
        if not isinstance(node.op, ast.USub):
            raise self.refuse(f"the operator {type(node.op).__name__} is not part of the dim grammar")
        return self.make("neg", (operand,))

    def binop(self, node: ast.BinOp, depth: int, rational: bool) -> Expr:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.refuse(f"the operator {type(node.op).__name__} is not part of the dim grammar")
        if op == "div" and not rational:
            raise self.refuse("`/` may only appear inside floor() or ceiling(); use // for integer division")
        if op == "pow":
            k = node.right
            if not (isinstance(k, ast.Constant) and type(k.value) is int and 0 <= k.value <= MAX_EXPONENT):
                raise self.refuse(f"the exponent of ** must be an integer literal from 0 to {MAX_EXPONENT}")
        return self.make(op, (self.walk(node.left, depth, rational), self.walk(node.right, depth, rational)))

    def call(self, node: ast.Call, depth: int, rational: bool) -> Expr:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            called = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
            raise self.refuse(f"{called}() is not a dim function (known: {', '.join(sorted(FUNCTIONS))})")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.refuse(f"{node.func.id}() takes plain positional arguments only")
        op = FUNCTIONS[node.func.id]
        if op == "div" and not rational:
            raise self.refuse(f"{node.func.id}() may only appear inside floor() or ceiling()")
        lo, hi = OPS[op].arity
        if not lo <= len(node.args) <= hi:
            count = lo if lo == hi else f"{lo} to {hi}"
            raise self.refuse(f"{node.func.id}() takes {count} argument(s), got {len(node.args)}")
        inner = rational or OPS[op].rational
        return self.make(op, tuple(self.walk(a, depth, inner) for a in node.args))

    def make(self, op: str, args: tuple[Expr, ...]) -> Expr:
        if op in ("div", "floordiv", "ceildiv", "mod") and args[1].op == "int" and args[1].value == 0:
            raise self.refuse("it divides by zero")
        if op == "pow":
            k = args[1].value
            num, den = (args[0].num_bits * k, args[0].den_bits * k) if k else (1, 0)
        else:
            num, den = OPS[op].bits(*((a.num_bits, a.den_bits) for a in args))
            if op in ("floordiv", "ceildiv", "mod"):  # they compute a/b first
                num = max(num, _bits_div(*((a.num_bits, a.den_bits) for a in args))[0])
        if max(num, den) > MAX_BITS:
            raise self.refuse("its values could grow beyond any tensor size (the expression is too large)")
        return Expr(op, args, num_bits=num, den_bits=den)

    HANDLERS = {ast.Constant: constant, ast.Name: name, ast.UnaryOp: unary, ast.BinOp: binop, ast.Call: call}


# ---- evaluation -------------------------------------------------------------
Evaluator = Callable[[dict[str, int]], Number]


def _closure(expr: Expr) -> Evaluator:
    if expr.op == "int":
        value = expr.value
        return lambda env: value
    if expr.op == "name":
        name = expr.value

        def lookup(env):
            try:
                value = env[name]
            except KeyError:
                raise ValueError(f"dimension {name!r} is not bound by any input") from None
            if type(value) is not int or not 0 <= value < 2**DIM_BITS:
                raise DimEvalError(f"dimension {name!r} is bound to {value!r}, not a tensor size")
            return value

        return lookup
    fn = OPS[expr.op].evaluate
    parts = [_closure(a) for a in expr.args]
    if len(parts) == 1:
        only, = parts
        return lambda env: fn(only(env))
    if len(parts) == 2:
        left, right = parts
        return lambda env: fn(left(env), right(env))
    return lambda env: fn(*(p(env) for p in parts))


def compile_int(text: str, signed: bool = False) -> Callable[[dict[str, int]], int]:
    """An exact evaluator of `text` (no eval, no lambdify): dims -> an integer in [0, MAX_SIZE]
    ([-MAX_SIZE, MAX_SIZE] when signed). ValueError names an unbound dim; DimEvalError a value
    that is no size (division by zero, negative, fractional, too large)."""
    parse(text)  # DimExprError for anything but a str in the grammar (and nothing unhashable reaches the cache)
    return _compile_int(text, signed)


@lru_cache(maxsize=4096)
def _compile_int(text: str, signed: bool) -> Callable[[dict[str, int]], int]:
    evaluate = _closure(parse(text))
    low = -MAX_SIZE if signed else 0

    def run(env: dict[str, int]) -> int:
        try:
            value = evaluate(env)
        except ZeroDivisionError:
            raise DimEvalError(f"dim expression {text!r} divides by zero for {_shown(env)}") from None
        if isinstance(value, Fraction):
            if value.denominator != 1:
                raise DimEvalError(f"dim expression {text!r} is {value} for {_shown(env)}, not an integer")
            value = value.numerator
        if value < low:
            raise DimEvalError(f"dim expression {text!r} is {value} for {_shown(env)}: "
                               + ("too small" if signed else "a size cannot be negative"))
        if value > MAX_SIZE:
            raise DimEvalError(f"dim expression {text!r} is {value} for {_shown(env)}, larger than any tensor size")
        return value

    return run


def _shown(env: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no dims"
