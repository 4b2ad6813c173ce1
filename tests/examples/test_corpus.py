"""The built-in corpus (examples/data/corpus.txt): shipped inside the package, plain English prose of a few KB, and the
tiny-llama folder's word-level tokenizer knows every word of it (the teacher-forced check feeds it to that model)."""
from __future__ import annotations

from ipexconvert.examples.corpus import corpus_text


def test_corpus_is_a_few_kilobytes_of_plain_prose():
    text = corpus_text()
    assert 3000 <= len(text.encode("utf-8")) <= 6000 and text.isascii()
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    assert len(paragraphs) >= 5 and all(p.strip().endswith(".") for p in paragraphs)
    assert len(text.split()) > 600


def test_corpus_tokenizes_without_unknown_words(tiny_llama_folder):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tiny_llama_folder / "tokenizer.json"))
    ids = tokenizer.encode(corpus_text()).ids
    unknown = tokenizer.token_to_id("<unk>")
    assert len(ids) > 600 and unknown not in ids
    assert tokenizer.decode(ids[:4]) == "the river begins as"


def test_corpus_ships_as_package_data():
    """Read through importlib.resources, so it works from a wheel (pyproject.toml packs the whole ipexconvert/ folder)."""
    from importlib import resources

    assert (resources.files("ipexconvert.examples") / "data" / "corpus.txt").is_file()
