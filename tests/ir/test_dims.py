"""Symbolic dims: expressions over named sizes evaluate exactly and simplify as sizes should."""
from __future__ import annotations

import pytest

from ipexconvert.ir.dims import add, broadcast, floordiv, mul, numel, resolve, resolve_shape, same, simplify


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("k, s, p, d", [(3, 3, 1, 1), (3, 2, 1, 1), (7, 2, 3, 1), (3, 5, 2, 2), (1, 7, 0, 1)])
def test_conv_size_expression_evaluates_exactly_at_every_size(k, s, p, d):
    """floor(w/3 - 1/3) + 1 must not round 2.9999 down: sizes are evaluated without floats."""
    expr = add(floordiv(add("w", 2 * p - d * (k - 1) - 1), s), 1)
    for size in range(d * (k - 1) + 1 - 2 * p if d * (k - 1) + 1 - 2 * p > 0 else 1, 400):
        assert resolve(expr, {"w": size}) == _conv_out(size, k, s, p, d), (expr, size)


def test_large_sizes_stay_exact():
    assert resolve("floor(n/3 - 1/3) + 1", {"n": 3 * 10**15 + 1}) == 10**15 + 1
    assert resolve("batch*seq*seq", {"batch": 7, "seq": 10**6}) == 7 * 10**12


@pytest.mark.parametrize("expr, bound, value", [
    ("FloorDiv(s, 4)", {"s": 11}, 2),
    ("CeilDiv(s, 4)", {"s": 11}, 3),
    ("Mod(s, 4)", {"s": 11}, 3),
    ("PythonMod(s, 4)", {"s": 11}, 3),
    ("((s - 1)//2) + 1", {"s": 10}, 5),
    ("2*batch + seq", {"batch": 3, "seq": 4}, 10),
])
def test_export_style_expressions_evaluate(expr, bound, value):
    assert resolve(expr, bound) == value


def test_sizes_are_positive_integers_so_floors_of_products_fold():
    assert simplify("floor(batch*seq)") == "batch*seq"
    assert same(floordiv(numel(["batch", "seq", 64]), 64), "batch*seq")
    assert simplify("seq - seq + 3") == 3


def test_unbound_dim_is_named_in_the_error():
    with pytest.raises(ValueError, match="'seq' is not bound"):
        resolve("batch*seq", {"batch": 2})


def test_static_arithmetic_stays_int():
    assert mul(3, 4) == 12 and floordiv(7, 2) == 3 and add(2, 5) == 7
    assert resolve_shape(["batch", 3, "batch*2"], {"batch": 5}) == [5, 3, 10]


def test_symbolic_broadcast():
    assert broadcast(["batch", "seq", 1], [1, "seq", 16]) == ["batch", "seq", 16]
    with pytest.raises(ValueError, match="do not broadcast"):
        broadcast(["batch", 3], ["batch", 4])
