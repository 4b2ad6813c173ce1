"""The built-in English text a converted decoder is judged on (`data/corpus.txt`, about 4 KB of prose written for
ipexconvert, see `data/README.md`): the teacher-forced accuracy check feeds it token by token."""
from __future__ import annotations

from importlib import resources

CORPUS_FILE = "corpus.txt"


def corpus_text() -> str:
    """The whole corpus as one string (paragraphs separated by blank lines)."""
    return (resources.files(__package__) / "data" / CORPUS_FILE).read_text(encoding="utf-8")
