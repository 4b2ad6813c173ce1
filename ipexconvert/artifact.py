"""The single-file artifact (.ipxc): a valid safetensors file.

Tensors are the weights; the safetensors metadata holds the manifest and graph
as JSON. No pickle anywhere, so loading an untrusted artifact runs no code.
Writes are atomic (temp file, fsync, rename); reads verify format version and
hashes before anything runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import torch
from pydantic import ValidationError
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from .errors import ArtifactError
from .ir import Graph, Program
from .manifest import FORMAT_VERSION, Manifest

MANIFEST_KEY = "ipexconvert.manifest"
GRAPH_KEY = "ipexconvert.graph"
EXAMPLE_PREFIX = "example_inputs/"  # the inputs used at conversion, kept for run/bench/check defaults


def tensor_sha256(tensor: torch.Tensor) -> str:
    raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    return hashlib.sha256(raw.numpy()).hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def graph_sha256(graph_json: str) -> str:
    return hashlib.sha256(graph_json.encode()).hexdigest()


def write_artifact(path: str | Path, program: Program, manifest: Manifest,
                   example_inputs: dict[str, torch.Tensor] | None = None) -> Manifest:
    """Fill the hashes into the manifest and write both atomically. Returns the final manifest."""
    path = Path(path)
    graph_json = program.graph.model_dump_json()
    tensors = {name: program.weights[name].detach().contiguous() for name in program.graph.constants}
    for name, tensor in (example_inputs or {}).items():
        tensors[EXAMPLE_PREFIX + name] = tensor.detach().contiguous()
    manifest = manifest.model_copy(update={
        "graph_sha256": graph_sha256(graph_json),
        "tensor_sha256": {name: tensor_sha256(t) for name, t in tensors.items()},
    })
    metadata = {MANIFEST_KEY: manifest.model_dump_json(), GRAPH_KEY: graph_json}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts are ordinary files
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return manifest


def read_manifest(path: str | Path) -> tuple[Manifest, str]:
    """Manifest and raw graph JSON, without loading tensors."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"artifact {path} does not exist", "check the path, or create it with `ipexconvert optimize`")
    if path.is_dir():
        raise ArtifactError(f"{path} is a folder, not an artifact file", "pass the .ipxc file inside it")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise ArtifactError(f"{path} is not a readable artifact (truncated or corrupt: {e})",
                            "re-create it with `ipexconvert optimize`; if it was copied, copy it again") from None
    if MANIFEST_KEY not in metadata or GRAPH_KEY not in metadata:
        raise ArtifactError(f"{path} is a safetensors file but not an ipexconvert artifact (no manifest)",
                            "convert the model first: `ipexconvert optimize SOURCE -o model.ipxc`")
    try:
        raw = json.loads(metadata[MANIFEST_KEY])
    except json.JSONDecodeError:
        raise ArtifactError(f"{path} has a corrupt manifest", "re-create it with `ipexconvert optimize`") from None
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path} has a corrupt manifest (not a JSON object)", "re-create it with `ipexconvert optimize`")
    version = raw.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise ArtifactError(
            f"{path} uses artifact format version {version}, newer than this ipexconvert supports ({FORMAT_VERSION})",
            "upgrade ipexconvert (pip install -U ipexconvert), or re-convert the model with this version")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as e:
        raise ArtifactError(f"{path} has an invalid manifest: {e.errors()[0]['msg']} at {e.errors()[0]['loc']}",
                            "re-create it with `ipexconvert optimize`") from None
    return manifest, metadata[GRAPH_KEY]


def read_artifact(path: str | Path, verify: bool = True) -> tuple[Manifest, Program]:
    manifest, graph_json = read_manifest(path)
    if verify and graph_sha256(graph_json) != manifest.graph_sha256:
        raise ArtifactError(f"{path}: the graph does not match its recorded hash (the file was modified)",
                            "re-create the artifact; do not edit .ipxc files by hand")
    try:
        graph = Graph.model_validate_json(graph_json)
    except ValidationError as e:
        raise ArtifactError(f"{path} has an invalid graph: {e.errors()[0]['msg']}", "re-create it with `ipexconvert optimize`") from None
    weights: dict[str, torch.Tensor] = {}
    try:
        with safe_open(str(path), framework="pt") as f:
            for name in graph.constants:
                weights[name] = f.get_tensor(name)
    except (SafetensorError, OSError) as e:
        raise ArtifactError(f"{path}: could not read weights ({e})", "re-create it with `ipexconvert optimize`") from None
    if verify:
        missing = set(graph.constants) - set(manifest.tensor_sha256)
        bad = [n for n, t in weights.items() if manifest.tensor_sha256.get(n) != tensor_sha256(t)]
        if missing or bad:
            which = ", ".join(sorted(missing | set(bad))[:5])
            raise ArtifactError(f"{path}: weights do not match their recorded hashes ({which})",
                                "the file is corrupt or was modified; re-create it with `ipexconvert optimize`")
    return manifest, Program(graph, weights)


def read_example_inputs(path: str | Path) -> dict[str, torch.Tensor]:
    """The example inputs stored at conversion (empty if the artifact has none)."""
    manifest, _ = read_manifest(path)
    with safe_open(str(path), framework="pt") as f:
        keys = [k for k in f.keys() if k.startswith(EXAMPLE_PREFIX)]
        tensors = {k[len(EXAMPLE_PREFIX):]: f.get_tensor(k) for k in keys}
    for name, tensor in tensors.items():
        if manifest.tensor_sha256.get(EXAMPLE_PREFIX + name) != tensor_sha256(tensor):
            raise ArtifactError(f"{path}: stored example input {name} does not match its hash",
                                "the file is corrupt; re-create it with `ipexconvert optimize`")
    return tensors
