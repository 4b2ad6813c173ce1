"""`ipexconvert inspect`: a summary of an artifact, without running it."""
from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from .artifact import read_manifest
from .errors import ArtifactError
from .ir import Graph, dtypes


def summarize(path: Path) -> dict:
    manifest, graph_json = read_manifest(path)
    try:
        graph = Graph.model_validate_json(graph_json)
    except ValidationError as e:
        raise ArtifactError(f"{path} has an invalid graph: {e.errors()[0]['msg']}",
                            "re-create it with `ipexconvert optimize`") from None
    by_dtype: dict[str, int] = {}
    for name in graph.constants:
        spec = graph.values[name]
        count = 1
        for d in spec.shape:
            count *= int(d)
        by_dtype[spec.dtype] = by_dtype.get(spec.dtype, 0) + count * dtypes.to_torch(spec.dtype).itemsize
    ins = ", ".join(f"{i.name}: {i.spec.describe()}" for i in manifest.inputs)
    outs = ", ".join(f"{o.name}: {o.spec.describe()}" for o in manifest.outputs)
    return {
        "file_bytes": Path(path).stat().st_size,
        "signature": f"({ins}) -> ({outs})",
        "weight_bytes_by_dtype": by_dtype,
        "node_count": len(graph.nodes),
        "manifest": manifest.model_dump(mode="json", exclude={"tensor_sha256"}),
    }
