"""A decoder artifact's generation record and stored tokenizer are untrusted data: a record that does not
match the graph, a tokenizer that is not valid JSON, or data stored as the wrong kind of tensor is a clear
ArtifactError, never a crash or a wrong answer."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.errors import ArtifactError
from security_helpers import rewrite_artifact

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


@pytest.fixture(scope="module")
def decoder_artifact(tmp_path_factory, tiny_llama_folder):
    return ipexconvert.optimize(tiny_llama_folder, output=tmp_path_factory.mktemp("decoder") / "llama.ipxc").path


def _generate(path):
    return ipexconvert.load_artifact(path).generate("the city", max_new_tokens=2)


def test_the_untouched_artifact_generates(decoder_artifact):
    assert len(_generate(decoder_artifact).new_ids[0]) >= 1


def _set(field, value):
    def edit(manifest):
        manifest["decoder"][field] = value
    return edit


@pytest.mark.parametrize("field, value, problem", [
    ("logits", "present_key_0", "is not a \\[batch, 1, vocab\\] output"),
    ("input_ids", "past_key_0", "is not an int64"),
    ("cache", [["past_key_0", "present_key_0"]], "not input_ids and the cache"),
    ("cache", [["past_key_0", "present_key_0"], ["past_key_0", "present_value_0"]], "name a tensor twice"),
    ("cache_dim", "batch", "not a dynamic dim starting at 0"),
    ("tokenizer", "missing.json", "does not hold"),
])
def test_a_record_that_does_not_match_the_graph_is_refused(decoder_artifact, tmp_path, field, value, problem):
    edited = rewrite_artifact(decoder_artifact, tmp_path / "edited.ipxc", edit_manifest=_set(field, value))
    with pytest.raises(ArtifactError, match=problem):
        _generate(edited)


def _replace_tokenizer(blob: bytes):
    def edit(tensors):
        tensors["data/tokenizer.json"] = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
    return edit


def test_a_tokenizer_that_is_not_valid_is_a_clear_error(decoder_artifact, tmp_path):
    edited = rewrite_artifact(decoder_artifact, tmp_path / "tok.ipxc", edit_tensors=_replace_tokenizer(b'{"model": 5'))
    with pytest.raises(ArtifactError, match="tokenizer.json cannot be read"):
        _generate(edited)


def test_a_tokenizer_changed_without_rehash_is_refused(decoder_artifact, tmp_path):
    edited = rewrite_artifact(decoder_artifact, tmp_path / "tok.ipxc", rehash=False,
                              edit_tensors=_replace_tokenizer((b" " * 10)))
    with pytest.raises(ArtifactError):
        _generate(edited)


def test_data_stored_as_another_dtype_is_refused_at_load(decoder_artifact, tmp_path):
    def as_int32(tensors):
        tensors["data/extra.json"] = torch.zeros(4, dtype=torch.int32)
    edited = rewrite_artifact(decoder_artifact, tmp_path / "int32.ipxc", edit_tensors=as_int32)
    with pytest.raises(ArtifactError, match="not a 1-D uint8 tensor"):
        ipexconvert.load_artifact(edited)
