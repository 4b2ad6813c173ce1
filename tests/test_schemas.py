"""The committed JSON Schemas must match the pydantic models (regenerate with python -m ipexconvert.schemas)."""
import json
from pathlib import Path

import pytest

from ipexconvert.schemas import SCHEMAS, render

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_committed_schema_matches_model(name):
    committed = (SCHEMA_DIR / name).read_text()
    assert committed == render(SCHEMAS[name]), f"schemas/{name} is stale: run `python -m ipexconvert.schemas`"


def test_manifest_schema_names_the_recorded_fields():
    props = json.loads((SCHEMA_DIR / "manifest.schema.json").read_text())["properties"]
    for field in ("format_version", "source", "dtype", "passes", "inputs", "outputs", "accuracy", "graph_sha256", "tensor_sha256"):
        assert field in props
