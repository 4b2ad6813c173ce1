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


# ---- the grammar (ipexconvert/ir/dim_expr.py): artifacts' dim strings are parsed, never sympified ----

def _torch_sympy_forms():
    """Expressions in the form torch.export's sympy functions print them, with their true values."""
    import sympy
    from torch.utils._sympy import functions as tf

    s, w = sympy.Symbol("s", integer=True, positive=True), sympy.Symbol("w", integer=True, positive=True)
    return [
        (tf.FloorDiv(s - 1, 2) + 1, lambda s, w: (s - 1) // 2 + 1),
        (tf.CeilDiv(s, 4), lambda s, w: -(-s // 4)),
        (tf.Mod(s, 4), lambda s, w: s % 4),
        (tf.PythonMod(s, 3), lambda s, w: s % 3),
        (tf.Max(s, w), max),
        (tf.Min(s, w + 1), lambda s, w: min(s, w + 1)),
        (2 * s * w + s * s, lambda s, w: 2 * s * w + s * s),
        (s + 1, lambda s, w: s + 1),
        (sympy.floor(s / 3 - sympy.Rational(1, 3)) + 1, lambda s, w: (s - 1) // 3 + 1),
        (tf.CeilToInt(tf.IntTrueDiv(s, 2)), lambda s, w: -(-s // 2)),  # math.ceil(s / 2) in a model
        (tf.FloorToInt(tf.IntTrueDiv(s + w, 3)), lambda s, w: (s + w) // 3),
        (tf.FloorDiv(tf.FloorDiv(tf.FloorDiv(s - 1, 4) - 2, 3) - 1, 4) + 1,  # a size after strided convs and pools
         lambda s, w: (((s - 1) // 4 - 2) // 3 - 1) // 4 + 1),
    ]


@pytest.mark.parametrize("index", range(12))
def test_strings_torch_prints_evaluate_like_the_arithmetic_they_stand_for(index):
    expr, truth = _torch_sympy_forms()[index]
    text = str(expr)  # what frontend/export.py stores
    for s in range(1, 40):
        for w in (1, 2, 7, 64):
            assert resolve(text, {"s": s, "w": w}) == truth(s, w), (text, s, w)
    assert same(text, simplify(text))


@pytest.mark.parametrize("text, canonical", [
    ("(s//2)", "floor(s/2)"),
    ("FloorDiv(s, 2)", "floor(s/2)"),
    ("CleanDiv(s, 2)", "floor(s/2)"),
    ("CeilDiv(s, 4)", "ceiling(s/4)"),
    ("PythonMod(s, 4)", "Mod(s, 4)"),
    ("floor(w/2 + 1)", "floor(w/2) + 1"),
    ("ceiling(batch*seq)", "batch*seq"),
    ("Max(seq, batch, seq)", "Max(batch, seq)"),
    ("Min(3, 5, s)", "Min(3, s)"),
    ("batch*batch", "batch**2"),
    ("Mod(7, 4)", 3),
    ("max(2, 9)", 9),
])
def test_simplify_gives_one_canonical_form_that_reads_back(text, canonical):
    assert simplify(text) == canonical
    if isinstance(canonical, str):
        assert simplify(canonical) == canonical  # stored strings parse under the grammar


def test_same_sees_through_order_and_arithmetic():
    assert same("batch*seq", "seq*batch")
    assert same("Max(a, b)", "Max(b, a)")
    assert same("2*(seq + 1)", "2*seq + 2")
    assert not same("batch*seq", "batch + seq")


def test_sizes_with_rationals_floor_exactly_at_large_values():
    n = 3 * 10**15 + 2
    assert resolve("floor(n/3 - 1/3) + 1", {"n": n}) == (n - 1) // 3 + 1
    assert resolve("ceiling(n/3)", {"n": n}) == -(-n // 3)


@pytest.mark.parametrize("text, why", [
    ("__import__('os').system('true')", "only dim names"),
    ("9**9**9**9", "exponent"),
    ("batch**100", "exponent"),
    ("((((a**8)**8)**8)**8)", "too large"),
    ("factorial(10**8)", "not a dim function"),
    ("Integer(64)", "not a dim function"),
    ("a" * 10_000, "longer than"),
    ("(" * 100 + "a" + ")" * 100, "nested deeper"),
    ("-" * 200 + "a", "nested deeper"),
    ("a.real", "only dim names"),
    ("a[0]", "only dim names"),
    ("lambda: 1", "only dim names"),
    ("'64'", "only dim names"),
    ("1.5", "only dim names"),
    ("1e3", "not a non-negative integer"),
    ("True", "not a non-negative integer"),
    ("a if b else c", "IfExp"),
    ("a/2", "only appear inside floor"),
    ("IntTrueDiv(a, 2)", "only appear inside floor"),
    ("floor(a, b)", "takes 1 argument"),
    ("Max(*a)", "positional"),
    ("a//0", "divides by zero"),
    ("Mod(a, 0)", "divides by zero"),
    ("", "not an expression"),
])
def test_the_grammar_refuses_everything_else_with_a_clear_error(text, why):
    import time

    from ipexconvert.ir.dims import DimExprError

    start = time.monotonic()
    for use in (simplify, lambda t: resolve(t, {"a": 2, "b": 3, "c": 4, "batch": 2})):
        with pytest.raises(DimExprError, match=why):
            use(text)
    assert time.monotonic() - start < 1.0


def test_values_that_are_no_size_are_clear_errors():
    from ipexconvert.errors import UserInputError
    from ipexconvert.ir.dims import resolve_int

    with pytest.raises(UserInputError, match="divides by zero"):
        resolve("FloorDiv(a, b)", {"a": 4, "b": 0})
    with pytest.raises(UserInputError, match="negative"):
        resolve("seq - 10", {"seq": 3})
    with pytest.raises(UserInputError, match="larger than any tensor size"):
        resolve("a**4", {"a": 2**20})
    assert resolve_int("-seq + 2", {"seq": 3}) == -1  # an aten argument (a slice start) may be negative


def test_long_intermediates_need_not_fit_the_grammar():
    """numel of a long shape may print longer than a stored entry may be; the final size is short."""
    sizes = [f"floor(floor(floor(h{i}/2 - 1/2)/2 + 1/2)/2 + 1/2) + 1" for i in range(12)]
    total = numel(sizes)
    assert len(total) > 512
    assert same(floordiv(total, sizes[0]), numel(sizes[1:]))
