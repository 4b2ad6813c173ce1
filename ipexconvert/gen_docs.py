"""Regenerates the docs made from the code: `python -m ipexconvert.gen_docs` writes docs/kernels.md (the
kernel registry) and docs/configuration.md (conversion settings and environment variables);
tests/test_generated_docs.py fails when either is stale."""
from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def generated() -> dict[str, str]:
    from .config import configuration_markdown
    from .doctor import kernels_markdown

    return {"kernels.md": kernels_markdown(), "configuration.md": configuration_markdown()}


if __name__ == "__main__":
    for name, text in generated().items():
        (DOCS / name).write_text(text)
        print(f"wrote {DOCS / name}")
