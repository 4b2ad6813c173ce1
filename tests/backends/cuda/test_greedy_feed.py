"""greedy_feed, the last kernel of a chained greedy decode step (backends/cuda/graphs.py): the arg-max of each row's
last logits (the lowest id on ties, NaN the largest, as torch.argmax) written into the ids input and the history row of
the position, then the position moved on. On the CPU (CI) the torch operators it falls back to without Triton; on a
GPU the Triton kernel against torch.argmax."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cuda import unavailable_reason
from ipexconvert.backends.cuda.graphs import greedy_feed
from ipexconvert.backends.cuda.kernels._triton import triton_missing

NO_GPU = unavailable_reason()

CASES = [(1, 32000, torch.float32, "plain"), (2, 4097, torch.bfloat16, "ties"), (4, 5, torch.float32, "ties"),
         (1, 151936, torch.bfloat16, "nan"), (3, 4096, torch.float32, "all_minus_inf"), (1, 1000, torch.float32, "plain")]


def _logits(batch: int, vocab: int, dtype: torch.dtype, kind: str, seed: int) -> torch.Tensor:
    logits = torch.randn(batch, 2, vocab, generator=torch.Generator().manual_seed(seed)).to(dtype)
    last = logits[:, -1]
    if kind == "ties":  # the largest value also later in the row (and in another 4096-block where the row has one)
        for b in range(batch):
            top = int(last[b].argmax())
            last[b, (top + 4096) % vocab] = last[b, top]
            last[b, (top + 1) % vocab] = last[b, top]
    elif kind == "nan":
        last[0, vocab // 2] = float("nan")
    elif kind == "all_minus_inf":
        last.fill_(float("-inf"))
    return logits


def _check(logits: torch.Tensor, position: int, rows: int = 8) -> None:
    batch, device = logits.shape[0], logits.device
    want = logits[:, -1].argmax(-1)
    ids = torch.full((batch, 1), -5, dtype=torch.int64, device=device)
    history = torch.full((rows, batch), -7, dtype=torch.int64, device=device)
    at = torch.tensor(position, dtype=torch.int64, device=device)
    greedy_feed(logits, ids, history, at)
    assert torch.equal(ids[:, 0], want)
    assert torch.equal(history[position], want)
    assert int((history != -7).sum()) == batch  # that row alone
    assert int(at) == position + 1


@pytest.mark.parametrize("batch, vocab, dtype, kind", CASES)
def test_feed_writes_the_arg_max_and_moves_the_position_on(batch, vocab, dtype, kind):
    _check(_logits(batch, vocab, dtype, kind, seed=vocab), position=vocab % 8)


def test_the_lowest_id_wins_a_tie():
    logits = torch.zeros(1, 1, 10)
    logits[0, 0, [3, 7]] = 2.0
    ids, history, at = torch.zeros(1, 1, dtype=torch.int64), torch.zeros(4, 1, dtype=torch.int64), torch.tensor(2)
    greedy_feed(logits, ids, history, at)
    assert int(ids) == 3 and int(history[2]) == 3 and int(at) == 3


@pytest.mark.skipif(NO_GPU is not None or triton_missing("") is not None,
                    reason=f"needs a CUDA GPU and Triton: {NO_GPU or triton_missing('')}")
@pytest.mark.parametrize("batch, vocab, dtype, kind", CASES)
def test_the_triton_kernel_is_torch_argmax(batch, vocab, dtype, kind):
    _check(_logits(batch, vocab, dtype, kind, seed=vocab + 1).cuda(), position=(vocab + 3) % 8)
