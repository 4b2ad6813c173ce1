"""Row chunks for oneDNN's bf16 linear: whole or in CHUNK-row calls, measured once per layer shape and range of rows.

torch's bundled oneDNN picks its bf16 matmul's blocking and thread split from the shapes, and for some layers a
middle range of row counts gets a poor one. On a 2-core AMX Xeon (session 65, `python benchmarks/row_chunks.py`):
BERT-base's 3072 -> 768 layer ran 1.13 TFLOP/s at 512 and 1024 rows and 2.04-2.08 in 256-row calls (2.48 whole at
2048 rows), its 768 -> 768 layer 1.24-1.48 against 1.86 in 256-row calls; 768 -> 2304 and all-MiniLM-L6-v2's layers at
4096 rows were fastest whole. Which layers and counts suffer depends on the CPU and on oneDNN's heuristics, so no
rule is written down: the first call of a layer shape (with its post-ops) in a range of row counts times the call
whole and in CHUNK-row calls (after one untimed call of each), alternately, BEST_OF each, and the process keeps the
faster (chunks only for a clear win: MARGIN). The ranges run from MIN_ROWS, each from a power of two to the next:
a server's varying batch x sequence rows are measured a few times, not once per count (oneDNN's slow spells span
such ranges; a count far from the measured one may be a little slower for it). Layers of one shape share the
choice; a layer's result is that of oneDNN's matmul either way (the chunks' sums may round differently in the last
bf16 bit, as oneDNN's kernels for different row counts do). IPEXCONVERT_ROW_CHUNKS=0 switches it off
(`benchmarks/ab.py ART --env IPEXCONVERT_ROW_CHUNKS`).
"""
from __future__ import annotations

import time
from typing import Callable, Hashable, Optional

import torch

from .... import environment

MIN_ROWS = 512
CHUNK = 256
BEST_OF = 3
MARGIN = 0.95  # chunked must take at most this share of the whole call's time

# (layer key, range of row counts) -> whether those calls run in chunks
_choices: dict[tuple, bool] = {}

Call = Callable[[torch.Tensor, Optional[torch.Tensor]], torch.Tensor]


def enabled() -> bool:
    return not environment.switched_off("IPEXCONVERT_ROW_CHUNKS")


def in_chunks(call: Call, x: torch.Tensor, operand: Optional[torch.Tensor], rows: int) -> torch.Tensor:
    """call over CHUNK-row slices of the 2-D x (and operand, the output's shape), joined."""
    return torch.cat([call(x[r:r + CHUNK], None if operand is None else operand[r:r + CHUNK])
                      for r in range(0, rows, CHUNK)])


def choose(call: Call, x: torch.Tensor, operand: Optional[torch.Tensor], rows: int) -> tuple[bool, torch.Tensor]:
    """Times call whole and in chunks (each once untimed: oneDNN makes its kernels for a new row count on the first
    call; then alternately, BEST_OF each); whether chunks won, and that variant's result."""
    best = {False: float("inf"), True: float("inf")}
    results: dict[bool, torch.Tensor] = {}
    call(x, operand)
    in_chunks(call, x, operand, rows)
    for _ in range(BEST_OF):
        for chunked in (False, True):
            start = time.perf_counter()
            results[chunked] = in_chunks(call, x, operand, rows) if chunked else call(x, operand)
            best[chunked] = min(best[chunked], time.perf_counter() - start)
    chunked = best[True] <= MARGIN * best[False]
    return chunked, results[chunked]


def row_chunked(call: Call, key: Hashable, out_features: int) -> Callable[[torch.Tensor, Optional[torch.Tensor]], torch.Tensor]:
    """call(x, operand) -> y for x [..., in] (operand: None or of y's shape), run whole or in chunks as measured for
    key and the power-of-two range holding the rows. Fewer than MIN_ROWS rows, or with the switch off, it is call
    itself."""
    if not enabled():
        return call

    def run(x: torch.Tensor, operand: Optional[torch.Tensor]) -> torch.Tensor:
        rows = x.numel() // x.shape[-1] if x.dim() and x.shape[-1] else 0
        if rows < MIN_ROWS:
            return call(x, operand)
        choice = (key, rows.bit_length())  # the range [2^(n-1), 2^n) that holds rows
        chunked = _choices.get(choice)
        if chunked is False:
            return call(x, operand)
        x2 = x.reshape(rows, x.shape[-1])
        operand2 = None if operand is None else operand.reshape(rows, out_features)
        if chunked is None:
            chunked, y = choose(call, x2, operand2, rows)
            _choices[choice] = chunked
        else:
            y = in_chunks(call, x2, operand2, rows)
        return y.reshape(*x.shape[:-1], out_features)

    return run
