"""decoder_settings.py: a decoder's token ids and tokenizer from the user's settings (over what the source says), and
a user's own decoder module judged teacher-forced when it is quantized weight-only: on the corpus through the
tokenizer given with --tokenizer, or on fixed pseudo-random ids within the vocabulary without one."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.config import ConversionConfig
from ipexconvert.decoder_accuracy import IDS_SEED
from ipexconvert.errors import UserInputError

import tiny_decoder
from tiny_decoder import VOCAB, TinyDecoder, eager_greedy

CORPUS = "corpus.txt through the stored tokenizer"
NO_TOKENIZER = f"pseudo-random ids (seed {IDS_SEED}): no tokenizer stored"


def _optimize(module, path, **settings):
    return ipexconvert.optimize(module, tiny_decoder.example_inputs(), dynamic_dims=tiny_decoder.dynamic_dims(),
                                output=path, **settings)


@pytest.fixture(scope="module")
def module():
    return TinyDecoder(seed=2)


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    """A word-level tokenizer.json over the corpus's first words, within the module's vocabulary."""
    tokenizers = pytest.importorskip("tokenizers")
    from ipexconvert.examples.corpus import corpus_text

    split = tokenizers.pre_tokenizers.Whitespace()
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for word, _ in split.pre_tokenize_str(corpus_text().lower()):
        if len(vocab) < VOCAB and word not in vocab:
            vocab[word] = len(vocab)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.normalizer = tokenizers.normalizers.Lowercase()
    tokenizer.pre_tokenizer = split
    tokenizer.decoder = tokenizers.decoders.WordPiece(prefix="##")
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def test_eos_and_bos_ids_from_the_settings(module, tmp_path):
    prompt = torch.tensor([[5, 6, 7, 8]])
    greedy = eager_greedy(module, prompt, 8)[0]
    result = _optimize(module, tmp_path / "eos.ipxc", eos_token_ids=greedy[3], bos_token_id=1)
    record = result.manifest.decoder
    assert (record.eos_token_ids, record.bos_token_id, record.tokenizer) == ([greedy[3]], 1, None)
    stopped = ipexconvert.load_artifact(result.path).generate(prompt, max_new_tokens=8)
    assert stopped.new_ids[0] == greedy[:greedy.index(greedy[3]) + 1] and stopped.stopped_by == "eos"


def test_a_tokenizer_given_is_stored_and_decodes(module, tokenizer_file, tmp_path):
    result = _optimize(module, tmp_path / "tok.ipxc", tokenizer=tokenizer_file)
    assert result.manifest.decoder.tokenizer == "tokenizer.json"
    model = ipexconvert.load_artifact(result.path)
    out = model.generate("the city is", max_new_tokens=6, stop_at_eos=False)
    ids = model.decoder.encode("the city is")
    assert out.new_ids == eager_greedy(module, ids, 6) and isinstance(out.text[0], str) and out.text[0]


def test_int4_of_an_own_decoder_is_judged_teacher_forced_on_fixed_ids(module, tmp_path):
    result = _optimize(module, tmp_path / "own.int4.ipxc", dtype="int4", group_size=32, decoder_positions=48)
    decoder = result.manifest.accuracy.decoder
    assert decoder is not None and decoder.text == NO_TOKENIZER and decoder.positions == 48 and decoder.passed
    assert result.manifest.weight_only_guard is not None
    assert any(node.op == "woq_linear" for node in ipexconvert.load_artifact(result.path).graph.nodes)
    prompt = torch.tensor([[3, 1, 4, 1, 5]])
    assert len(ipexconvert.load_artifact(result.path).generate(prompt, max_new_tokens=16).new_ids[0]) == 16


def test_weight_only_int8_with_a_tokenizer_is_judged_on_the_corpus(module, tokenizer_file, tmp_path):
    result = _optimize(module, tmp_path / "own.woq8.ipxc", dtype="int8", int8_scheme="weight-only",
                       tokenizer=tokenizer_file, decoder_positions=48)
    decoder = result.manifest.accuracy.decoder
    assert decoder.text == CORPUS and decoder.positions == 48 and decoder.passed and decoder.mean_cosine > 0.99


def test_decoder_settings_for_a_model_that_is_not_a_decoder_are_refused(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    with pytest.raises(UserInputError, match="decoder.eos_token_ids, decoder.tokenizer apply to decoders"):
        ipexconvert.optimize(model, {"input": torch.randn(2, 4)}, output=tmp_path / "m.ipxc", eos_token_ids=[2],
                             tokenizer=tmp_path / "tokenizer.json")


@pytest.mark.parametrize("settings, problem", [
    ({"eos_token_ids": [VOCAB]}, f"token id(s) {VOCAB} are outside the model's vocabulary of {VOCAB}"),
    ({"bos_token_id": VOCAB + 4}, f"token id(s) {VOCAB + 4} are outside"),
    ({"tokenizer": "missing/tokenizer.json"}, "--tokenizer missing/tokenizer.json is not a file"),
])
def test_bad_decoder_settings_are_clear_errors(module, tmp_path, settings, problem):
    with pytest.raises(UserInputError) as caught:
        _optimize(module, tmp_path / "bad.ipxc", **settings)
    assert problem in caught.value.problem and caught.value.exit_code == 2
    assert not (tmp_path / "bad.ipxc").exists()


def test_a_tokenizer_that_does_not_parse_is_a_clear_error(module, tmp_path):
    pytest.importorskip("tokenizers")
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": 5')
    with pytest.raises(UserInputError, match="is not a tokenizer.json the tokenizers library reads"):
        _optimize(module, tmp_path / "bad.ipxc", tokenizer=bad)


def test_settings_in_the_config():
    cfg = ConversionConfig.build(eos_token_ids=2, bos_token_id=1, tokenizer="tok.json")
    assert (cfg.decoder.eos_token_ids, cfg.decoder.bos_token_id, str(cfg.decoder.tokenizer)) == ([2], 1, "tok.json")
    assert cfg.decoder.given() == ["decoder.eos_token_ids", "decoder.bos_token_id", "decoder.tokenizer"]
    with pytest.raises(UserInputError, match="decoder.eos_token_ids"):
        ConversionConfig.build(eos_token_ids=[-1])
