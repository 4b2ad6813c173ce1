"""decoder_accuracy.py: a decoder artifact judged teacher-forced against eager float32 on the built-in corpus. An fp32
artifact matches eager (cosine ~1, top-1 1.0, perplexity ratio ~1); weight-only int8 and int4 conversions of the
tiny-llama folder are judged by it, with the numbers recorded in the manifest and shown by inspect; the metrics and
the fixed ids of a decoder without a tokenizer."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.api import load_artifact, optimize
from ipexconvert.decoder_accuracy import (DECODER_BUDGETS, JUDGED_BY, DecoderBudget, compare, describe_failure,
                                          measure_decoder, token_sequence)
from ipexconvert.inspection import summarize

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")
CORPUS = "corpus.txt through the stored tokenizer"


@pytest.fixture(scope="module")
def fp32_llama(tiny_llama_folder, tmp_path_factory):
    return optimize(tiny_llama_folder, output=tmp_path_factory.mktemp("fp32") / "llama.ipxc")


@LLAMA_EXPORTS
def test_fp32_artifact_matches_eager_teacher_forced(fp32_llama):
    record = measure_decoder(load_artifact(fp32_llama.path), fp32_llama.source.eager)
    assert (record.text, record.prefill_tokens, record.positions) == (CORPUS, 16, 128)
    assert record.mean_cosine > 0.999999 and record.min_cosine > 0.99999 and record.top1_agreement == 1.0
    assert abs(record.perplexity_ratio - 1.0) < 1e-4 and record.passed
    assert record.budget_mean_cosine == DECODER_BUDGETS["fp32"].min_mean_cosine
    assert fp32_llama.manifest.accuracy.decoder is None  # float conversions keep the element-wise check


@LLAMA_EXPORTS
def test_weight_only_int8_is_judged_teacher_forced(tiny_llama_folder, tmp_path):
    result = optimize(tiny_llama_folder, dtype="int8", int8_scheme="weight-only", output=tmp_path / "llama.woq8.ipxc")
    accuracy = result.manifest.accuracy
    decoder = accuracy.decoder
    assert accuracy.judged_by == JUDGED_BY and accuracy.passed and decoder.passed and decoder.text == CORPUS
    budget = DECODER_BUDGETS["int8"]
    assert (decoder.budget_mean_cosine, decoder.budget_top1_agreement, decoder.budget_perplexity_ratio) == \
        (budget.min_mean_cosine, budget.min_top1_agreement, budget.max_perplexity_ratio)
    # measured: mean cosine 0.99996, top-1 0.98-0.99, perplexity ratio within 0.001 of 1
    assert decoder.mean_cosine > 0.9999 and decoder.top1_agreement >= 0.95 and abs(decoder.perplexity_ratio - 1) < 0.01
    guard = result.manifest.weight_only_guard
    assert guard.passed and guard.candidates == 8 and len(guard.rounds) == 1 and not guard.float_layers
    shown = summarize(result.path)["manifest"]
    assert shown["accuracy"]["decoder"] == decoder.model_dump(mode="json") and shown["weight_only_guard"]["passed"]


@LLAMA_EXPORTS
def test_int4_numbers_and_budgets_given_by_the_user(tiny_llama_folder, tmp_path):
    result = optimize(tiny_llama_folder, dtype="int4", min_cosine=0.975, min_top1_agreement=0.6,
                      max_perplexity_ratio=1.1, decoder_positions=96, output=tmp_path / "llama.int4.ipxc")
    decoder = result.manifest.accuracy.decoder
    assert (decoder.budget_mean_cosine, decoder.budget_top1_agreement, decoder.budget_perplexity_ratio) == (0.975, 0.6, 1.1)
    assert decoder.positions == 96 and result.manifest.accuracy.budget_min_cosine == 0.975
    # measured over 128 positions: mean cosine 0.983, top-1 0.71, perplexity ratio 1.004 (random weights: flat logits)
    assert decoder.passed and decoder.mean_cosine > 0.975 and decoder.top1_agreement > 0.6
    assert abs(decoder.perplexity_ratio - 1) < 0.05
    assert not result.manifest.weight_only_guard.float_layers


def test_a_decoder_without_a_tokenizer_gets_fixed_ids():
    first, again = token_sequence(None, 1000, 50), token_sequence(None, 1000, 50)
    assert first == again and len(first.ids) == 50 and all(0 <= i < 1000 for i in first.ids)
    assert "no tokenizer" in first.text


def test_compare_scores_identical_logits_perfect_and_names_what_missed():
    logits = torch.randn(20, 30, generator=torch.Generator().manual_seed(0))
    targets = torch.randint(0, 30, (20,), generator=torch.Generator().manual_seed(1))
    budget = DecoderBudget(0.99, 0.9, 1.05)
    same = compare(logits, logits, targets, budget, "eager", "text", 4)
    assert same.passed and same.top1_agreement == 1.0 and same.perplexity_ratio == pytest.approx(1.0)
    assert same.mean_cosine == pytest.approx(1.0) and same.positions == 20 and same.prefill_tokens == 4
    shuffled = compare(logits.roll(1, dims=0), logits, targets, budget, "eager", "text", 4)
    assert not shuffled.passed and shuffled.top1_agreement < 0.5
    assert "top-1 agreement" in describe_failure(shuffled) and "mean logits cosine" in describe_failure(shuffled)
    broken = compare(torch.full_like(logits, float("nan")), logits, targets, budget, "eager", "text", 4)
    assert not broken.passed  # NaN fails every budget
