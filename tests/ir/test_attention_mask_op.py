"""attention_mask keeps a mask that is the same for every query row as one row expanded (the attention kernels
then widen one row per head), with the values the plain conversion gives; sdpa's fully-masked-rows check reads
such a mask once per row."""
from __future__ import annotations

import torch

from ipexconvert.ir.ops.attention_mask import AttentionMaskAttrs, AttentionMaskOp
from ipexconvert.ir.ops.sdpa import fully_masked_rows


def convert(mask: torch.Tensor) -> torch.Tensor:
    return AttentionMaskOp.reference([mask], AttentionMaskAttrs(dtype="bfloat16"), {})


def plain(mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, 0.0, float("-inf")).to(torch.bfloat16)


def padding(batch: int = 3, rows: int = 6, keys: int = 7) -> torch.Tensor:
    keep = torch.arange(keys)[None, :] < torch.tensor([7, 4, 2])[:batch, None]
    return keep[:, None, None, :].expand(batch, 1, rows, keys)


def test_a_padding_mask_built_out_to_every_row_becomes_one_row_expanded():
    full = padding().contiguous()  # as transformers builds it: padding & (q_idx >= 0), materialised
    out = convert(full)
    assert out.shape == full.shape and out.stride(2) == 0
    assert torch.equal(out, plain(full))


def test_an_expanded_mask_stays_expanded():
    out = convert(padding())
    assert out.stride(2) == 0 and torch.equal(out, plain(padding()))


def test_rows_that_differ_are_kept():
    causal = torch.ones(6, 6, dtype=torch.bool).tril()[None, None].expand(2, 1, 6, 6).contiguous()
    out = convert(causal)
    assert out.stride(2) != 0 and torch.equal(out, plain(causal))
    float_mask = torch.randn(2, 1, 4, 5)
    assert torch.equal(convert(float_mask), float_mask.to(torch.bfloat16))


def test_fully_masked_rows_of_an_expanded_mask():
    mask = padding()
    mask = torch.cat([mask, torch.zeros_like(mask[:1])])  # a fourth batch row with every key masked
    additive = convert(mask.contiguous())
    got = fully_masked_rows(additive)
    assert got.shape == (4, 1, 6, 1)
    assert torch.equal(got, (additive == float("-inf")).all(-1, keepdim=True))
    assert got[3].all() and not got[:3].any()
