"""Between two ways of running one layer, the one that layer's own calls in the model measured faster.

Our AMX tile GEMM (bf16_amx_gemm) reads each panel of a layer's weight from memory once a call, where oneDNN's
matmul read BERT-base's 170 MB of bf16 weights at ~9 GB/s on a 2-core AMX Xeon whose effective L3 holds less than
that (session 66: the model 0.92-0.95 x the time). On the GPU machine's AMX host, whose L3 held the whole model, the
same kernel made the model 1.05 x slower. What decides it is where the weights are when the layer runs, which an
isolated measurement (the weight hot after its first call) cannot see, and which no cache size read from the CPU
predicts (a VM reports its host's L3). So the layer's first calls in the model alternate between the two,
the first call of each untimed, then TIMED each; the faster median is kept for that layer and range of row counts
(a power of two to the next, as _row_chunks.py's). Each call is timed where the model makes it, after the layers
before it ran, so its weight is as cold as it will be.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Optional

TIMED = 3  # timed calls of each way before choosing (after one untimed call of each)


def row_range(rows: int) -> int:
    """The range of row counts a choice covers: [2^i, 2^(i+1))."""
    return max(rows, 1).bit_length()


class InSitu:
    """Runs `first` or `second` (the same arguments, the same result up to rounding) for a layer: per range of row
    counts, alternately while measuring, then the faster. `on_choice(range, chose_first)` is told each choice."""

    def __init__(self, first: Callable, second: Callable,
                 on_choice: Optional[Callable[[int, bool], None]] = None, clock: Callable[[], float] = time.perf_counter):
        self.first, self.second, self.on_choice, self.clock = first, second, on_choice, clock
        self.choices: dict[int, bool] = {}  # row range -> first chosen
        self._seconds: dict[int, tuple[list[float], list[float]]] = {}

    @property
    def measuring(self) -> bool:
        """Some range of row counts is still being measured."""
        return bool(self._seconds)

    def __call__(self, rows: int, *args):
        key = row_range(rows)
        chose_first = self.choices.get(key)
        if chose_first is not None:
            return self.first(*args) if chose_first else self.second(*args)
        first_s, second_s = self._seconds.setdefault(key, ([], []))  # (threads sharing a model may race here: at
        # worst a range is measured with a sample more or less, or chosen twice)
        use_first = len(first_s) <= len(second_s)
        start = self.clock()
        out = self.first(*args) if use_first else self.second(*args)
        (first_s if use_first else second_s).append(self.clock() - start)
        if len(second_s) > TIMED:  # each has its untimed call and TIMED timed ones
            chose_first = statistics.median(first_s[1:]) <= statistics.median(second_s[1:])
            self.choices[key] = chose_first
            self._seconds.pop(key, None)
            if self.on_choice is not None:
                self.on_choice(key, chose_first)
        return out
