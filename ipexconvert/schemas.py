"""JSON Schema of the manifest and graph, generated from the pydantic models.

`python -m ipexconvert.schemas` rewrites schemas/; tests fail when the committed
files drift from the models.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .ir import Graph
from .manifest import Manifest

SCHEMAS = {"manifest.schema.json": Manifest, "graph.schema.json": Graph}


def render(model) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in SCHEMAS.items():
        path = folder / name
        path.write_text(render(model))
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "schemas"
    for p in write(target):
        print(f"wrote {p}")
