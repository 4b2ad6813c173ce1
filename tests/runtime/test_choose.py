"""The greedy choice of the next token (runtime/decoder._choose at temperature 0): torch's argmax semantics, first
largest value per row, the first NaN where a row holds one, on strided rows of float32 logits."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.errors import ArtifactError
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


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_sampling_from_non_finite_logits_is_a_clear_error(bad):
    """A model whose logits hold NaN or Inf (found by the fuzzer: a norm weight edited to inf) cannot be sampled
    from: an ArtifactError saying so, not torch.multinomial's RuntimeError. Greedy still picks (the first NaN)."""
    logits = torch.randn(2, 50, generator=torch.Generator().manual_seed(1))
    logits[1, 7] = bad
    with pytest.raises(ArtifactError, match="NaN or infinite"):
        _choose(logits, SamplingSettings(8, 0.8, 5, 0.9, 3, False), torch.Generator().manual_seed(3))
    assert _choose(logits, GREEDY, None)[1].item() == 7
