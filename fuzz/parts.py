"""An artifact taken apart for mutation, and put back together (with or without valid hashes).

The fuzzer reads and writes the safetensors container itself instead of going through
`safetensors`: a mutation may make a tensor's header disagree with its bytes, tile the data
section wrongly, or put a non-string into the metadata, none of which `save_file` can write.

Re-hashing goes through the project's own `ipexconvert.artifact.rehash` (the function the writer
uses), so whatever scheme artifact.py implements, a re-hashed mutant carries hashes the loader
accepts and the deeper checks get exercised. The fuzzer checks that at start-up: an unmutated seed,
rewritten here with re-hashing, must load and run (see fuzz_artifact.self_check).
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ipexconvert import artifact
from ipexconvert.artifact import GRAPH_KEY, MANIFEST_KEY

# safetensors dtype codes the project writes -> torch dtypes (what a tensor's bytes mean)
TORCH_OF_CODE = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                 "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                 "BOOL": torch.bool}
CODE_OF_TORCH = {v: k for k, v in TORCH_OF_CODE.items()}
IR_NAME_OF_CODE = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                   "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
CODE_OF_IR_NAME = {v: k for k, v in IR_NAME_OF_CODE.items()}

HASH_FIELDS = ("graph_sha256", "tensor_sha256", "content_sha256")
EXAMPLE_PREFIX = getattr(artifact, "EXAMPLE_PREFIX", "example_inputs/")


@dataclass
class TensorRec:
    """One tensor as the file holds it: header dtype code and shape (any JSON after a mutation) and bytes."""

    dtype: Any
    shape: Any
    data: bytes
    extra: dict = field(default_factory=dict)  # extra keys in its header entry

    def as_torch(self) -> torch.Tensor | None:
        """The tensor its header describes, or None when the header does not describe its bytes."""
        dtype = TORCH_OF_CODE.get(self.dtype) if isinstance(self.dtype, str) else None
        if dtype is None or self.extra or not isinstance(self.shape, list):
            return None
        if not all(type(d) is int and 0 <= d < 2**40 for d in self.shape):
            return None
        numel = 1
        for d in self.shape:
            numel *= d
        if numel * dtype.itemsize != len(self.data):
            return None
        flat = torch.frombuffer(bytearray(self.data), dtype=torch.uint8) if self.data else torch.empty(0, dtype=torch.uint8)
        return flat.view(dtype).reshape(self.shape)

    @classmethod
    def of(cls, tensor: torch.Tensor) -> "TensorRec":
        t = tensor.detach().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return cls(CODE_OF_TORCH[t.dtype], list(t.shape), data)


@dataclass
class Parts:
    """manifest and graph are parsed JSON; `raw` maps placeholder strings to JSON text spliced in verbatim
    when writing (deep nesting, duplicate keys: what json.dumps cannot produce); header_edits change the
    safetensors header dict after the offsets are laid out; byte_edits change the finished file;
    after_rehash edit the manifest object once the hashes are in (edits of the hash fields themselves)."""

    manifest: Any
    graph: Any
    tensors: dict[str, TensorRec]
    other_metadata: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    header_edits: list[Callable[[dict], None]] = field(default_factory=list)
    byte_edits: list[Callable[[bytes], bytes]] = field(default_factory=list)
    after_rehash: list[Callable[[dict], None]] = field(default_factory=list)
    rehash: bool = True
    notes: list[str] = field(default_factory=list)  # what each mutation did, for the finding's record
    # json.dumps of the manifest/graph as read -> their original text: an unedited part keeps its exact text,
    # so a mutant written without re-hashing fails the hash check only where the mutation changed something
    original_text: dict[str, str] = field(default_factory=dict)

    def copy(self) -> "Parts":
        """Deep copy of the JSON; tensor records are copied, their bytes (immutable) shared."""
        return Parts(_clone(self.manifest), _clone(self.graph),
                     {k: TensorRec(v.dtype, _clone(v.shape), v.data, dict(v.extra)) for k, v in self.tensors.items()},
                     _clone(self.other_metadata), dict(self.raw), list(self.header_edits), list(self.byte_edits),
                     list(self.after_rehash), self.rehash, list(self.notes),
                     self.original_text)

    # ---- reading ------------------------------------------------------------------------------------------------
    @classmethod
    def read(cls, data: bytes) -> "Parts":
        """Parse a valid artifact (a seed)."""
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        meta = dict(header.pop("__metadata__", {}) or {})
        manifest_text, graph_text = meta.pop(MANIFEST_KEY), meta.pop(GRAPH_KEY)
        manifest, graph = json.loads(manifest_text), json.loads(graph_text)
        start = 8 + n
        tensors = {}
        for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            a, b = info["data_offsets"]
            tensors[name] = TensorRec(info["dtype"], list(info["shape"]), bytes(data[start + a:start + b]))
        original = {json.dumps(manifest, allow_nan=True): manifest_text, json.dumps(graph, allow_nan=True): graph_text}
        return cls(manifest, graph, tensors, meta, original_text=original)

    def example_inputs(self) -> dict[str, torch.Tensor]:
        """The example inputs stored in the file (a seed's: valid inputs to call the model with)."""
        out = {}
        for name, rec in self.tensors.items():
            if name.startswith(EXAMPLE_PREFIX):
                t = rec.as_torch()
                if t is not None:
                    out[name[len(EXAMPLE_PREFIX):]] = t.clone()
        return out

    # ---- writing ------------------------------------------------------------------------------------------------
    def _dumps(self, obj: Any) -> str:
        text = json.dumps(obj, allow_nan=True)
        if text in self.original_text:
            return self.original_text[text]
        for token, raw in self.raw.items():
            text = text.replace(json.dumps(token), raw)
        return text

    def build(self) -> bytes:
        graph_text = self.graph if isinstance(self.graph, str) else self._dumps(self.graph)
        manifest = self.manifest
        if self.rehash and isinstance(manifest, dict):
            manifest = rehash_manifest(manifest, graph_text, self.tensors)
        if isinstance(manifest, dict):
            manifest = copy.deepcopy(manifest) if self.after_rehash else manifest
            for edit in self.after_rehash:
                edit(manifest)
        manifest_text = manifest if isinstance(manifest, str) else self._dumps(manifest)
        if self.rehash and isinstance(manifest, dict) and any(json.dumps(t) in json.dumps(manifest) for t in self.raw):
            manifest_text = _rehash_spliced(manifest_text, graph_text, self.tensors)

        header: dict[str, Any] = {"__metadata__": {**self.other_metadata, MANIFEST_KEY: manifest_text, GRAPH_KEY: graph_text}}
        offset = 0
        for name, rec in self.tensors.items():
            header[name] = {"dtype": rec.dtype, "shape": rec.shape, "data_offsets": [offset, offset + len(rec.data)],
                            **rec.extra}
            offset += len(rec.data)
        for edit in self.header_edits:
            edit(header)
        head = json.dumps(header, allow_nan=True).encode("utf-8", "surrogatepass")
        head += b" " * (-len(head) % 8)  # safetensors pads the header to 8 bytes
        out = len(head).to_bytes(8, "little") + head + b"".join(rec.data for rec in self.tensors.values())
        for edit in self.byte_edits:
            out = edit(out)
        return out


def _clone(obj: Any) -> Any:
    """A deep copy of parsed JSON (a JSON round trip: several times faster than copy.deepcopy)."""
    if isinstance(obj, (dict, list)):
        return json.loads(json.dumps(obj, allow_nan=True))
    return obj


# ---- hashing --------------------------------------------------------------------------------------------------------


def rehash_manifest(manifest: dict, graph_text: str, tensors: dict[str, TensorRec]) -> dict:
    """The manifest with valid hashes for this graph text and these tensors, computed by artifact.py itself.

    When every tensor header describes its bytes, this is exactly `artifact.rehash`. Otherwise (a header
    mutated without its bytes) the byte hashes are of the bytes and the content hash is over the headers as
    written, the way the loader would compute it, so the mutant is refused by a structural check, not a hash."""
    as_torch = {name: rec.as_torch() for name, rec in tensors.items()}
    if all(t is not None for t in as_torch.values()):
        return artifact.rehash(manifest, graph_text, as_torch)
    out = dict(manifest)
    out["graph_sha256"] = artifact.graph_sha256(graph_text)
    out["tensor_sha256"] = {name: hashlib.sha256(rec.data).hexdigest() for name, rec in tensors.items()}
    try:
        out["content_sha256"] = artifact.content_sha256(
            out, graph_text, {name: (IR_NAME_OF_CODE.get(rec.dtype, str(rec.dtype)) if isinstance(rec.dtype, str)
                                     else str(rec.dtype), rec.shape) for name, rec in tensors.items()})
    except Exception:  # headers the hash cannot even be written for (the loader refuses them before hashing)
        pass
    return out


def _rehash_spliced(manifest_text: str, graph_text: str, tensors: dict[str, TensorRec]) -> str:
    """A manifest with raw JSON spliced in: recompute content_sha256 over what the loader will parse."""
    try:
        parsed = json.loads(manifest_text)
    except (ValueError, RecursionError):
        return manifest_text
    if not isinstance(parsed, dict) or not isinstance(parsed.get("content_sha256"), str):
        return manifest_text
    fresh = rehash_manifest(parsed, graph_text, tensors)
    return manifest_text.replace(json.dumps(parsed["content_sha256"]), json.dumps(fresh.get("content_sha256", "")), 1)
