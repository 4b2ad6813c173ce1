"""The docs made from the code (`python -m ipexconvert.gen_docs`) match the code: a kernel, config field or
environment variable added, removed or changed without regenerating them fails here."""
from __future__ import annotations

import pytest

from ipexconvert.gen_docs import DOCS, generated


@pytest.mark.parametrize("name", sorted(generated()))
def test_generated_doc_is_current(name):
    assert (DOCS / name).read_text() == generated()[name], f"docs/{name} is out of date: run `python -m ipexconvert.gen_docs`"
