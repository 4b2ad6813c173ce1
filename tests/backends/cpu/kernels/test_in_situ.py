"""_in_situ.InSitu: per range of row counts, the layer's first calls alternate between two ways (an untimed call of
each, then TIMED each), then the faster median stays; checked with a fake clock."""
from __future__ import annotations

import pytest

from ipexconvert.backends.cpu.kernels._in_situ import TIMED, InSitu, row_range


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
def test_alternates_then_keeps_the_faster(a_ms, b_ms, chose_a):
    told = []
    choice, log = make({"a": a_ms, "b": b_ms}, lambda key, first: told.append((key, first)))
    measuring_calls = 2 * (TIMED + 1)
    results = [choice(128, 128) for _ in range(measuring_calls + 3)]
    assert log[:measuring_calls] == ["a", "b"] * (TIMED + 1)
    assert results[measuring_calls:] == ["a" if chose_a else "b"] * 3
    assert choice.choices == {row_range(128): chose_a} and not choice.measuring
    assert told == [(row_range(128), chose_a)]


def test_the_untimed_first_calls_do_not_count():
    first_call = {"a": True}

    def a_cost(rows):  # a's first call is slow (a cold start), its others fast
        slow, first_call["a"] = first_call["a"], False
        return 100.0 if slow else 1.0

    choice, _ = make({"a": a_cost, "b": 2.0})
    for _ in range(2 * (TIMED + 1)):
        choice(64, 64)
    assert choice.choices == {row_range(64): True}


def test_each_range_of_row_counts_measures_on_its_own():
    choice, _ = make({"a": lambda rows: rows * 1.0, "b": lambda rows: 100.0})  # a wins below 100 rows
    for rows in (16, 150):
        for _ in range(2 * (TIMED + 1)):
            choice(rows, rows)
    assert choice.choices == {row_range(16): True, row_range(150): False}
    assert row_range(16) == row_range(31) != row_range(32)
