"""The greedy choice of the next token (runtime/decoder._choose at temperature 0): torch's argmax semantics, first
largest value per row, the first NaN where a row holds one, on strided rows of float32 logits."""
from __future__ import annotations

import torch

from ipexconvert.runtime.decoder import SamplingSettings, _choose

GREEDY = SamplingSettings(8, 0.0, 0, 1.0, None, False)


def test_greedy_choice_is_torch_argmax():
    logits = torch.randn(3, 5, 1000, generator=torch.Generator().manual_seed(0))
    logits[0, -1, [10, 700]] = 50.0  # a tie: the first
    logits[1, -1, 400] = float("nan")  # NaN wins, as in torch.argmax
    logits[1, -1, 900] = float("nan")
    logits[2, -1, :] = -float("inf")
    rows = logits[:, -1, :]  # strided rows, as generate() hands them over
    chosen = _choose(rows, GREEDY, None)
    assert chosen.dtype == torch.int64 and chosen.tolist() == rows.argmax(dim=-1).tolist() == [10, 400, 0]
