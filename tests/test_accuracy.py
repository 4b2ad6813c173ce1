"""accuracy.py: what is measured per output, and what decides per dtype (fp32 element-wise; bf16 and
int8 by every sample's cosine, so one element far off in a 0.998-cosine embedding does not fail)."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.accuracy import (ELEMENTWISE, NEIGHBOUR_ROWS, PER_SAMPLE, compare_output, describe_failure, measure,
                                  nearest_neighbours)


def embeddings(n=8, dim=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g)


def test_one_element_far_off_in_a_close_embedding_passes_int8_but_not_fp32():
    want = embeddings()
    got = want.clone()
    got[3, 5] += 0.3 * want.abs().max()  # 30% of the largest value, in one element
    record = measure(["emb"], [got], [want], "int8", "eager")
    (o,) = record.outputs
    assert o.max_rel_error > 0.25  # over the old int8 budget
    assert o.sample_cosine_min > 0.98 and record.passed and record.judged_by == PER_SAMPLE
    fp32 = measure(["emb"], [got], [want], "fp32", "eager")
    assert not fp32.passed and fp32.judged_by == ELEMENTWISE
    assert "max relative error" in describe_failure(fp32)


def test_one_bad_sample_fails_even_when_the_whole_cosine_is_high():
    want = embeddings(n=64)
    got = want.clone()
    got[10] = -got[10]  # one sample reversed
    (o,) = measure(["emb"], [got], [want], "bf16", "eager").outputs
    assert o.cosine > 0.95 and o.sample_cosine_min == pytest.approx(-1.0)
    record = measure(["emb"], [got], [want], "bf16", "eager")
    assert not record.passed
    assert "lowest sample cosine -1.000000" in describe_failure(record)


def test_an_explicit_relative_budget_is_judged_too():
    want = embeddings()
    got = want.clone()
    got[0, 0] += 0.5 * want.abs().max()
    record = measure(["emb"], [got], [want], "int8", "eager", max_rel_error=0.1)
    assert not record.passed and "relative" in record.judged_by
    assert "max relative error" in describe_failure(record)


def test_top1_and_neighbour_agreement():
    want = embeddings(n=6, dim=10, seed=1)
    o = compare_output("logits", want.clone(), want)
    assert o.top1_agreement == 1.0 and o.neighbour_agreement == 1.0 and o.sample_cosine_min == pytest.approx(1.0)
    swapped = want.clone()
    row = swapped[2]
    top = row.argmax()
    row[top], row[(top + 1) % 10] = row[(top + 1) % 10].item(), row[top].item()
    assert compare_output("logits", swapped, want).top1_agreement == pytest.approx(5 / 6)
    assert compare_output("two", want[:2], want[:2]).neighbour_agreement is None  # needs 3 samples


def test_neighbours_are_found_among_a_bounded_number_of_rows():
    """A batch of many outputs (a model declaring a huge static batch) is compared on its first NEIGHBOUR_ROWS rows:
    the similarity matrix stays NEIGHBOUR_ROWS square instead of growing with the square of the batch."""
    many = embeddings(n=NEIGHBOUR_ROWS + 500, dim=4, seed=2)
    found = nearest_neighbours(many)
    assert found.shape == (NEIGHBOUR_ROWS,)
    assert torch.equal(found, nearest_neighbours(many[:NEIGHBOUR_ROWS]))
    assert compare_output("embeddings", many.clone(), many).neighbour_agreement == 1.0


def test_shapes_without_samples_and_zero_outputs():
    o = compare_output("scalar", torch.tensor(2.0), torch.tensor(2.0))
    assert o.sample_cosine_min is None and o.cosine == 1.0
    zeros = compare_output("zeros", torch.zeros(3, 4), torch.zeros(3, 4))
    assert zeros.sample_cosine_min == 1.0 and zeros.max_rel_error == 0.0
    assert measure(["x"], [torch.zeros(3, 4)], [torch.zeros(3, 4)], "int8", "eager").passed


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="artifact shape"):
        measure(["x"], [torch.zeros(2, 3)], [torch.zeros(3, 2)], "fp32", "eager")


def test_nan_and_inf_agree_only_with_themselves():
    want = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    same = compare_output("y", want.clone(), want)
    assert same.max_abs_error == 0.0 and same.cosine == pytest.approx(1.0)
    for wrong in ([1.0, 0.0, float("inf"), -2.0], [1.0, float("nan"), float("-inf"), -2.0], [float("nan"), float("nan"), float("inf"), -2.0]):
        o = compare_output("y", torch.tensor(wrong), want)
        assert o.max_abs_error == float("inf") and o.cosine == 0.0, wrong


def test_an_fp32_conversion_of_a_16_bit_model_is_judged_at_that_models_precision():
    want = torch.linspace(0.5, 1.0, 64).to(torch.bfloat16).reshape(1, 64)
    one_ulp_off = (want.float() + 2 ** -8).to(torch.bfloat16)  # bf16 computed in float32 elsewhere
    record = measure(["y"], [one_ulp_off], [want], "fp32", "eager")
    assert record.passed and record.budget_rel_error == pytest.approx(4 * 2 ** -7)
    float32_model = measure(["y"], [one_ulp_off.float()], [want.float()], "fp32", "eager")
    assert not float32_model.passed and float32_model.budget_rel_error == 1e-3
    assert not measure(["y"], [(want.float() * 1.1).to(torch.bfloat16)], [want], "fp32", "eager").passed


def test_an_fp32_record_judged_as_bf16():
    """An fp32 decoder with its KV cache in bf16 (--kv-cache bf16) holds bf16-rounded values: bf16's budget and
    per-sample judgement decide, the record still says fp32."""
    want = embeddings()
    got = want.bfloat16().float()  # each value rounded once to bf16: ~0.4% relative
    assert not measure(["cache"], [got], [want], "fp32", "eager").passed
    record = measure(["cache"], [got], [want], "fp32", "eager", judged_as="bf16")
    bf16 = measure(["cache"], [got], [want], "bf16", "eager")
    assert record.passed and record.dtype == "fp32" and record.judged_by == PER_SAMPLE
    assert (record.budget_rel_error, record.budget_min_cosine) == (bf16.budget_rel_error, bf16.budget_min_cosine)
