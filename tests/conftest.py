"""Fixtures several test folders share."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_llama_folder(tmp_path_factory):
    """tiny-llama saved as a Hugging Face folder with a word-level tokenizer (read-only for the tests)."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from ipexconvert.examples.llama_folder import save_tiny_llama_folder

    folder = tmp_path_factory.mktemp("tiny-llama-hf") / "tiny-llama"
    save_tiny_llama_folder(folder)
    return folder
