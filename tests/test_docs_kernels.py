"""docs/kernels.md is generated from the kernel registry (`ipexconvert doctor --kernels --markdown`) and
must match it: a kernel added, removed or reordered without regenerating the docs fails here."""
from __future__ import annotations

from pathlib import Path

from ipexconvert.doctor import kernels_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "kernels.md"


def test_docs_kernels_md_is_the_registry():
    assert DOC.read_text() == kernels_markdown(), (
        "docs/kernels.md is out of date: run `ipexconvert doctor --kernels --markdown > docs/kernels.md`")
