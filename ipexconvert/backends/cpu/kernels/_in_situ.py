"""Between two ways of running one layer, the one that layer's own calls in the model measured faster.

Our AMX tile GEMM (bf16_amx_gemm) reads each panel of a layer's weight from memory once a call, where oneDNN's
matmul read BERT-base's 170 MB of bf16 weights at ~9 GB/s on a 2-core AMX Xeon whose effective L3 holds less than
that (session 66: the model 0.92-0.95 x the time). On the GPU machine's AMX host, whose L3 held the whole model, the
same kernel made the model 1.05 x slower. What decides it is where the weights are when the layer runs, which an
isolated measurement (the weight hot after its first call) cannot see, and which no cache size read from the CPU
predicts (a VM reports its host's L3). So the layer's first calls in the model run one way for a block of calls,
then the other (WARM untimed calls each, then TIMED timed ones); the faster median is kept for that layer and range
of row counts (a power of two to the next, as _row_chunks.py's). Each call is timed where the model makes it, after
the layers before it ran, so its weight is as cold as it will be. Blocks, not alternating calls: every layer
measures at the same calls, so during a block the whole model runs one way and the caches hold that way's weights
only, as they will once a way is chosen. Alternating calls mixed both ways' weights (two copies of the model's) in the
caches while measuring: on the GPU machine's AMX host (300 MB L3) that choice kept the tiles for 23 of BERT-base's 48
layers, each of which then ran 1.05-1.15 x oneDNN's time in steady state (session 67; the model 0.97-1.03 x).
Benchmarks warm an artifact up for runtime.kernels.CHOOSING_CALLS calls, so their timings start after the choice.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Hashable, Optional

from ....runtime.kernels import CHOOSING_CALLS

WARM = 2  # untimed calls of each way's block: its weights come into the caches (and a lazily made one is made)
TIMED = 3  # timed calls that follow them
assert 2 * (WARM + TIMED) <= CHOOSING_CALLS, "warm-ups (runtime.kernels.CHOOSING_CALLS) must cover the measuring"


def row_range(rows: int) -> int:
    """The range of row counts a choice covers: [2^i, 2^(i+1))."""
    return max(rows, 1).bit_length()


class InSitu:
    """Runs `first` or `second` (the same arguments, the same result up to rounding) for a layer: per range of row
    counts, a block of calls of each while measuring, then the faster. `on_choice(range, chose_first)` is told each
    choice. `key_of` maps a call's first argument to what a choice covers (default: its row range; a convolution's
    choice covers one input shape)."""

    def __init__(self, first: Callable, second: Callable,
                 on_choice: Optional[Callable[[Hashable, bool], None]] = None,
                 clock: Callable[[], float] = time.perf_counter, key_of: Callable[..., Hashable] = row_range):
        self.first, self.second, self.on_choice, self.clock, self.key_of = first, second, on_choice, clock, key_of
        self.choices: dict[Hashable, bool] = {}  # key -> first chosen
        self._seconds: dict[Hashable, list[float]] = {}  # key -> its calls so far

    @property
    def measuring(self) -> bool:
        """Some range of row counts is still being measured."""
        return bool(self._seconds)

    def __call__(self, rows, *args):
        key = self.key_of(rows)
        chose_first = self.choices.get(key)
        if chose_first is not None:
            return self.first(*args) if chose_first else self.second(*args)
        calls = self._seconds.setdefault(key, [])  # (threads sharing a model may race here: at worst a range is
        # measured with a sample more or less, or chosen twice)
        block = WARM + TIMED
        use_first = len(calls) < block
        start = self.clock()
        out = self.first(*args) if use_first else self.second(*args)
        calls.append(self.clock() - start)
        if len(calls) == 2 * block:
            first_s, second_s = calls[WARM:block], calls[block + WARM:]
            chose_first = statistics.median(first_s) <= statistics.median(second_s)
            self.choices[key] = chose_first
            self._seconds.pop(key, None)
            if self.on_choice is not None:
                self.on_choice(key, chose_first)
        return out
