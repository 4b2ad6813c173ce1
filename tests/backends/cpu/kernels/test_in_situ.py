"""_in_situ.InSitu: per range of row counts, the layer's first calls run a block of each way (WARM untimed calls, then
TIMED timed ones), then the faster median stays; checked with a fake clock."""
from __future__ import annotations

import pytest

from ipexconvert.backends.cpu.kernels._in_situ import TIMED, WARM, InSitu, row_range

BLOCK = WARM + TIMED


class Clock:
    """perf_counter for InSitu: each way's call advances it by that way's cost."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def way(self, name, costs, log):
        def call(rows):
            cost = costs[name]
            self.now += cost(rows) if callable(cost) else cost
            log.append(name)
            return name
        return call


def make(costs, on_choice=None):
    clock, log = Clock(), []
    return InSitu(clock.way("a", costs, log), clock.way("b", costs, log), on_choice, clock), log


@pytest.mark.parametrize("a_ms, b_ms, chose_a", [(1.0, 2.0, True), (2.0, 1.0, False), (1.0, 1.0, True)])
def test_a_block_of_each_then_keeps_the_faster(a_ms, b_ms, chose_a):
    told = []
    choice, log = make({"a": a_ms, "b": b_ms}, lambda key, first: told.append((key, first)))
    measuring_calls = 2 * BLOCK
    results = [choice(128, 128) for _ in range(measuring_calls + 3)]
    assert log[:measuring_calls] == ["a"] * BLOCK + ["b"] * BLOCK  # the whole model one way, then the other
    assert results[measuring_calls:] == ["a" if chose_a else "b"] * 3
    assert choice.choices == {row_range(128): chose_a} and not choice.measuring
    assert told == [(row_range(128), chose_a)]


def test_the_untimed_first_calls_of_a_block_do_not_count():
    calls = {"a": 0, "b": 0}

    def cost(name, warm, steady):  # a way's first WARM calls are slow (cold caches, a weight made lazily)
        def call(rows):
            calls[name] += 1
            return warm if calls[name] <= WARM else steady
        return call

    choice, _ = make({"a": cost("a", 100.0, 1.0), "b": cost("b", 0.5, 2.0)})
    for _ in range(2 * BLOCK):
        choice(64, 64)
    assert choice.choices == {row_range(64): True}


def test_each_range_of_row_counts_measures_on_its_own():
    choice, _ = make({"a": lambda rows: rows * 1.0, "b": lambda rows: 100.0})  # a wins below 100 rows
    for rows in (16, 150):
        for _ in range(2 * BLOCK):
            choice(rows, rows)
    assert choice.choices == {row_range(16): True, row_range(150): False}
    assert row_range(16) == row_range(31) != row_range(32)


def test_key_of_sets_what_a_choice_covers():
    """A convolution's choice covers one input shape (key_of): each shape measures on its own calls."""
    clock, log = Clock(), []
    costs = {"a": lambda shape: 1.0 if shape[2] == 14 else 3.0, "b": 2.0}
    choice = InSitu(clock.way("a", costs, log), clock.way("b", costs, log), clock=clock, key_of=lambda shape: shape)
    for shape in [(1, 8, 14, 14)] * (2 * BLOCK) + [(1, 8, 7, 7)] * (2 * BLOCK):
        choice(shape, shape)
    assert choice.choices == {(1, 8, 14, 14): True, (1, 8, 7, 7): False}
