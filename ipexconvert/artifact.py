"""The single-file artifact (.ipxc): a valid safetensors file.

Tensors are the weights; the safetensors metadata holds the manifest and graph
as JSON. No pickle anywhere, so loading an untrusted artifact runs no code.
Writes are atomic (temp file, fsync, rename).

Reads parse the safetensors layout themselves (header size, nesting depth, offsets
and sizes all bounded and checked), accept only regular files (a FIFO or device
would block or never end), and copy every tensor into private memory with plain
reads: once loaded, truncating or overwriting the file changes nothing (a mapping
of the file would fault with SIGBUS or change under the model).

Integrity: one `content_sha256` in the manifest binds everything the loader trusts,
the manifest itself (without that field), the graph JSON, and each tensor's name,
dtype, shape and bytes:

    tensor digest  = sha256(json [name, dtype, shape, sha256(bytes)])
    content_sha256 = sha256("ipexconvert-content/2\\n" + sha256(canonical manifest) + "\\n"
                            + sha256(graph JSON) + "\\n" + the tensor digests sorted by name, one a line)

The canonical manifest is its JSON object without `content_sha256`, dumped with sorted
keys and no spaces; the byte hashes are the manifest's `tensor_sha256` (so the content
hash covers them too) and every one is checked against the bytes read. This detects
corruption and edits that were not re-hashed; it is not a signature: whoever can write
the file can re-hash it, which is why the loader also checks that the graph, the
manifest and the tensors agree with each other (see `_check_consistency`,
`ir.graph.check_graph` and `ir.validate.check_nodes`).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from pydantic import ValidationError
from safetensors.torch import save_file

from .errors import ArtifactError
from .ir import Graph, Program, dtypes
from .ir.graph import check_graph
from .ir.validate import check_nodes
from .manifest import FORMAT_VERSION, Manifest
from .quant.plan import QuantPlan

MANIFEST_KEY = "ipexconvert.manifest"
GRAPH_KEY = "ipexconvert.graph"
EXAMPLE_PREFIX = "example_inputs/"  # the inputs used at conversion, kept for run/bench/check defaults
DATA_PREFIX = "data/"  # files kept as bytes (a decoder's tokenizer.json): read as data, never run
MAX_DATA_BYTES = 64 << 20  # Qwen2's tokenizer.json is 7 MB

MAX_HEADER_BYTES = 100 << 20  # safetensors header (JSON with the metadata); ResNet-50's is ~60 KB
MAX_JSON_DEPTH = 64  # real manifests and graphs nest 5-7 levels
_CONTENT_DOMAIN = b"ipexconvert-content/2\n"

# safetensors dtype codes -> IR dtype names (the ones ipexconvert writes)
_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                       "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}

HASH_THREADS = max(1, min(4, os.cpu_count() or 1))  # threads that hash tensors while the next ones are read
_RECREATE = "re-create it with `ipexconvert optimize`"
_CORRUPT_FIX = "re-create it with `ipexconvert optimize`; if it was copied, copy it again"
_MODIFIED_FIX = "the file is corrupt or was modified; re-create the artifact, and do not edit .ipxc files by hand"


# ---- hashing ----------------------------------------------------------------------------------------------------------


def tensor_sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's bytes (row-major, contiguous)."""
    raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    return hashlib.sha256(raw.numpy()).hexdigest()


def graph_sha256(graph_json: str) -> str:
    return hashlib.sha256(graph_json.encode()).hexdigest()


def tensor_digest(name: str, dtype: str, shape: list[int], sha256: str) -> str:
    """One tensor's identity: name, dtype, shape and the sha256 of its bytes."""
    record = json.dumps([name, dtype, [int(d) for d in shape], sha256], separators=(",", ":"))
    return hashlib.sha256(record.encode()).hexdigest()


def canonical_manifest(manifest: Mapping[str, Any]) -> bytes:
    """The manifest JSON object minus its own `content_sha256`, in one canonical form."""
    body = {k: v for k, v in manifest.items() if k != "content_sha256"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def content_sha256(manifest: Mapping[str, Any], graph_json: str, tensors: Mapping[str, tuple[str, list[int]]]) -> str:
    """The hash over everything the loader trusts. `tensors`: name -> (dtype, shape) of every tensor in the
    file; their byte hashes are the manifest's `tensor_sha256` (each must be there)."""
    byte_hashes = manifest.get("tensor_sha256") or {}
    h = hashlib.sha256(_CONTENT_DOMAIN)
    h.update(hashlib.sha256(canonical_manifest(manifest)).hexdigest().encode() + b"\n")
    h.update(graph_sha256(graph_json).encode() + b"\n")
    for name in sorted(tensors):
        dtype, shape = tensors[name]
        h.update(tensor_digest(name, dtype, shape, byte_hashes[name]).encode() + b"\n")
    return h.hexdigest()


def rehash(manifest: Mapping[str, Any], graph_json: str, tensors: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """A copy of the manifest (a JSON object) with graph_sha256, tensor_sha256 and content_sha256 computed for
    this graph JSON and these tensors (every tensor the file will hold)."""
    out = dict(manifest)
    out["graph_sha256"] = graph_sha256(graph_json)
    out["tensor_sha256"] = {name: tensor_sha256(t) for name, t in tensors.items()}
    out["content_sha256"] = content_sha256(
        out, graph_json, {name: (dtypes.to_name(t.dtype), list(t.shape)) for name, t in tensors.items()})
    return out


# ---- writing ------------------------------------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _unshare(tensors: dict[str, torch.Tensor]) -> None:
    """safetensors stores each tensor once and refuses names sharing memory; passes may give two constants
    one storage (an exporter's deduplicated zero biases, each layer's `bias.float()` of them), so every
    later one gets its own copy."""
    seen: set[int] = set()
    for name, t in tensors.items():
        if t.numel() == 0:
            continue
        key = t.untyped_storage().data_ptr()
        if key in seen:
            tensors[name] = t.clone()
        else:
            seen.add(key)


def write_artifact(path: str | Path, program: Program, manifest: Manifest,
                   example_inputs: dict[str, torch.Tensor] | None = None, data: Mapping[str, bytes] | None = None) -> Manifest:
    """Fill the hashes into the manifest and write both atomically. Returns the final manifest.
    `data`: files stored as uint8 tensors under data/ (hashed like every tensor)."""
    path = Path(path)
    graph_json = program.graph.model_dump_json()
    tensors = {name: program.weights[name].detach().contiguous() for name in program.graph.constants}
    for name, tensor in (example_inputs or {}).items():
        tensors[EXAMPLE_PREFIX + name] = tensor.detach().contiguous()
    for name, blob in (data or {}).items():
        if len(blob) > MAX_DATA_BYTES:
            raise ArtifactError(f"data file {name} has {len(blob)} bytes, over the {MAX_DATA_BYTES >> 20} MiB limit",
                                "store a smaller file")
        tensors[DATA_PREFIX + name] = torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob \
            else torch.zeros(0, dtype=torch.uint8)
    _unshare(tensors)
    raw = json.loads(manifest.model_copy(update={"format_version": FORMAT_VERSION}).model_dump_json())
    raw = rehash(raw, graph_json, tensors)
    manifest = Manifest.model_validate(raw)
    metadata = {MANIFEST_KEY: json.dumps(raw), GRAPH_KEY: graph_json}
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


# ---- reading the safetensors layout -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One tensor of the file: IR dtype, shape, and where its bytes are (absolute file offsets)."""

    dtype: str
    shape: list[int]
    start: int
    end: int


class _ArtifactFile:
    """An open artifact: header parsed and checked, tensors read on demand into private memory."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = _open_regular_file(path)
        try:
            self.size = os.fstat(self.fd).st_size
            self.metadata, self.entries = self._read_header()
        except BaseException:
            os.close(self.fd)
            raise

    def __enter__(self) -> "_ArtifactFile":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)

    def _corrupt(self, why: str) -> ArtifactError:
        return ArtifactError(f"{self.path} is not a readable artifact (truncated or corrupt: {why})", _CORRUPT_FIX)

    def _pread(self, size: int, offset: int) -> bytes:
        data = os.pread(self.fd, size, offset)
        if len(data) != size:
            raise self._corrupt(f"{size} bytes expected at offset {offset}, the file ends first")
        return data

    def _read_header(self) -> tuple[dict[str, str], dict[str, _Entry]]:
        if self.size < 8:
            raise self._corrupt(f"{self.size} bytes, shorter than a safetensors header")
        header_len = int.from_bytes(self._pread(8, 0), "little")
        if header_len > MAX_HEADER_BYTES:
            raise self._corrupt(f"header size {header_len} bytes, over the {MAX_HEADER_BYTES >> 20} MiB limit")
        if 8 + header_len > self.size:
            raise self._corrupt(f"header size {header_len} bytes, larger than the file")
        try:
            header = _json_loads(self._pread(header_len, 8).decode("utf-8"), "header")
        except (UnicodeDecodeError, ValueError) as e:
            raise self._corrupt(f"header is not JSON: {e}") from None
        if not isinstance(header, dict):
            raise self._corrupt("header is not a JSON object")
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise self._corrupt("metadata is not a map of strings")
        data_start = 8 + header_len
        entries: dict[str, _Entry] = {}
        for name, info in header.items():
            entries[name] = self._entry(name, info, data_start)
        # The tensors must tile the data section exactly: no gaps, no overlaps, nothing after it.
        position = data_start
        for entry in sorted(entries.values(), key=lambda e: (e.start, e.end)):
            if entry.start != position:
                raise self._corrupt("tensor data overlaps or leaves gaps")
            position = entry.end
        if position != self.size:
            raise self._corrupt(f"the tensors end at byte {position}, the file has {self.size}")
        return metadata, entries

    def _entry(self, name: str, info: Any, data_start: int) -> _Entry:
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise self._corrupt(f"tensor {name!r} has a malformed header entry")
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"]) if isinstance(info["dtype"], str) else None
        if dtype is None:
            raise self._corrupt(f"tensor {name!r} has dtype {info['dtype']!r}, which ipexconvert does not use")
        shape, offsets = info["shape"], info["data_offsets"]
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise self._corrupt(f"tensor {name!r} has an invalid shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise self._corrupt(f"tensor {name!r} has invalid data offsets {offsets!r}")
        numel = 1
        for d in shape:
            numel *= d
        if offsets[1] - offsets[0] != numel * dtypes.to_torch(dtype).itemsize:
            raise self._corrupt(f"tensor {name!r}: {dtype}{shape} does not fit its {offsets[1] - offsets[0]} bytes")
        return _Entry(dtype, list(shape), data_start + offsets[0], data_start + offsets[1])

    def read_tensors(self, names: list[str]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        """These tensors copied into private memory, and the sha256 of each one's bytes."""
        entries = {name: self.entries[name] for name in names}
        total = sum(e.end - e.start for e in entries.values())
        if total > _physical_memory():
            raise ArtifactError(f"{self.path} holds {total / 2**30:.1f} GiB of weights, more than this machine's memory",
                                "load it on a machine with more memory; if the file is not yours, do not trust it")
        tensors: dict[str, torch.Tensor] = {}
        hashing: dict[str, Future] = {}
        # Each tensor is hashed on a helper thread while the next one is read (hashlib and the read release the
        # GIL): a 263 MB int4 decoder's load spent 0.45 s hashing after 0.30 s of reading.
        with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
            for name, entry in sorted(entries.items(), key=lambda kv: kv[1].start):  # one sequential pass over the file
                raw = torch.empty(entry.end - entry.start, dtype=torch.uint8)
                self._read_into(memoryview(raw.numpy()), entry.start)
                hashing[name] = pool.submit(_sha256, raw.numpy())
                if entry.dtype == "bool" and bool((raw > 1).any()):
                    raise self._corrupt(f"bool tensor {name!r} holds bytes other than 0 and 1")
                tensors[name] = raw.view(dtypes.to_torch(entry.dtype)).reshape(entry.shape)
        return tensors, {name: future.result() for name, future in hashing.items()}

    def _read_into(self, buffer: memoryview, offset: int) -> None:
        done = 0
        while done < len(buffer):
            n = os.preadv(self.fd, [buffer[done:]], offset + done)
            if n <= 0:
                raise self._corrupt(f"the file ended at byte {offset + done} while reading tensors (truncated while loading?)")
            done += n


def _sha256(data) -> str:
    return hashlib.sha256(data).hexdigest()


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def _open_regular_file(path: Path) -> int:
    """A read-only descriptor of a regular file. FIFOs, devices, sockets and folders are refused before
    opening; O_NONBLOCK keeps a path swapped for a FIFO after the check from blocking the open."""
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise ArtifactError(f"artifact {path} does not exist",
                            "check the path, or create it with `ipexconvert optimize`") from None
    except OSError as e:
        raise ArtifactError(f"artifact {path} cannot be read: {e.strerror}", "check the path and its permissions") from None
    if stat.S_ISDIR(before.st_mode):
        raise ArtifactError(f"{path} is a folder, not an artifact file", "pass the .ipxc file inside it")
    if not stat.S_ISREG(before.st_mode):
        raise ArtifactError(f"{path} is not a regular file ({_file_kind(before.st_mode)})",
                            "pass the path of an .ipxc file; artifacts are not read from pipes, devices or sockets")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ArtifactError(f"artifact {path} cannot be opened: {e.strerror}", "check the path and its permissions") from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise ArtifactError(f"{path} changed while it was being opened (now {_file_kind(after.st_mode)})",
                            "pass the path of an .ipxc file that nothing else is replacing")
    return fd


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return kind
    return "not a regular file"


def _json_loads(text: str, what: str) -> Any:
    """json.loads with the nesting depth bounded (deep nesting would exhaust the recursion limit later)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} JSON is nested too deeply") from None
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"{what} JSON is nested more than {MAX_JSON_DEPTH} levels deep")
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return value


# ---- reading the artifact -------------------------------------------------------------------------------------------


def _read_metadata(f: _ArtifactFile) -> tuple[dict[str, Any], Manifest, str]:
    """The raw manifest object, the validated manifest and the graph JSON."""
    path, metadata = f.path, f.metadata
    if MANIFEST_KEY not in metadata or GRAPH_KEY not in metadata:
        raise ArtifactError(f"{path} is a safetensors file but not an ipexconvert artifact (no manifest)",
                            "convert the model first: `ipexconvert optimize SOURCE -o model.ipxc`")
    try:
        raw = _json_loads(metadata[MANIFEST_KEY], "manifest")
    except ValueError as e:
        raise ArtifactError(f"{path} has a corrupt manifest ({e})", _RECREATE) from None
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path} has a corrupt manifest (not a JSON object)", _RECREATE)
    version = raw.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise ArtifactError(
            f"{path} uses artifact format version {version}, newer than this ipexconvert supports ({FORMAT_VERSION})",
            "upgrade ipexconvert (pip install -U ipexconvert), or re-convert the model with this version")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as e:
        raise ArtifactError(f"{path} has an invalid manifest: {e.errors()[0]['msg']} at {e.errors()[0]['loc']}",
                            _RECREATE) from None
    quant_plan(path, manifest)
    return raw, manifest, metadata[GRAPH_KEY]


def quant_plan(path: Path, manifest: Manifest) -> QuantPlan | None:
    """The manifest's `quantization` record (stored as a dict) as a QuantPlan, validated strictly (exact JSON
    types, no unknown fields): `inspect` prints it, so a record that is not one is a corrupt manifest."""
    if manifest.quantization is None:
        return None
    try:
        return QuantPlan.model_validate(manifest.quantization, strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"]))[:200] or "the record"  # loc holds layer names: bounded, escaped
        raise ArtifactError(f"{path} has an invalid quantization record in its manifest: {first['msg']} at "
                            f"{ascii(where)} ({e.error_count()} error(s))", _RECREATE) from None


def read_manifest(path: str | Path) -> tuple[Manifest, str]:
    """Manifest and raw graph JSON, without reading tensors or checking hashes (for `inspect`, which also
    shows artifacts of older format versions)."""
    with _ArtifactFile(Path(path)) as f:
        _, manifest, graph_json = _read_metadata(f)
    return manifest, graph_json


def _check_version(path: Path, manifest: Manifest) -> None:
    if manifest.format_version < FORMAT_VERSION:
        raise ArtifactError(
            f"{path} was written by an older ipexconvert (artifact format version {manifest.format_version}; "
            f"this one reads version {FORMAT_VERSION}, whose hash covers the manifest, graph and tensor shapes too)",
            "re-convert it with this ipexconvert: `ipexconvert optimize SOURCE -o model.ipxc`")


def _verify_hashes(f: _ArtifactFile, raw: dict[str, Any], manifest: Manifest, graph_json: str) -> None:
    """The graph hash, every tensor having a recorded byte hash, and the content hash (no tensor data read)."""
    path = f.path
    if graph_sha256(graph_json) != manifest.graph_sha256:
        raise ArtifactError(f"{path}: the graph does not match its recorded hash (the file was modified)",
                            "re-create the artifact; do not edit .ipxc files by hand")
    unlisted = sorted(set(f.entries) - set(manifest.tensor_sha256))
    if unlisted:
        raise ArtifactError(f"{path}: weights do not match their recorded hashes ({', '.join(unlisted[:5])})", _MODIFIED_FIX)
    missing = sorted(set(manifest.tensor_sha256) - set(f.entries))
    if missing:
        raise ArtifactError(f"{path}: could not read weights (no tensor {', '.join(missing[:5])} in the file)", _RECREATE)
    expected = content_sha256(raw, graph_json, {name: (e.dtype, e.shape) for name, e in f.entries.items()})
    if expected != manifest.content_sha256:
        raise ArtifactError(f"{path}: the manifest, graph and tensor headers do not match their recorded hash "
                            "(content_sha256; the file was modified)", _MODIFIED_FIX)


def _parse_graph(path: Path, graph_json: str) -> Graph:
    try:
        return Graph.model_validate(_json_loads(graph_json, "graph"))
    except ValueError as e:  # JSON errors, depth, and pydantic's ValidationError (a ValueError)
        detail = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
        raise ArtifactError(f"{path} has an invalid graph: {detail}", _RECREATE) from None


def _check_consistency(f: _ArtifactFile, manifest: Manifest, graph: Graph) -> None:
    """The manifest's signature is the graph's, and every tensor is what the graph says it is."""
    path = f.path
    for kind, ios, names in (("inputs", manifest.inputs, graph.inputs), ("outputs", manifest.outputs, graph.outputs)):
        recorded = [(io.name, io.spec) for io in ios]
        actual = [(name, graph.values.get(name)) for name in names]
        if recorded != actual:
            raise ArtifactError(
                f"{path}: the manifest's {kind} ({_describe(recorded)}) are not the graph's ({_describe(actual)})",
                f"the manifest and graph disagree, so the file was edited; {_RECREATE}")
    if manifest.dims != graph.dims:
        raise ArtifactError(f"{path}: the manifest's dynamic dims {_dims(manifest.dims)} are not the graph's "
                            f"{_dims(graph.dims)}", f"the manifest and graph disagree, so the file was edited; {_RECREATE}")
    expected = set(graph.constants) | {n for n in f.entries if n.startswith(EXAMPLE_PREFIX)}
    expected |= set(_data_entries(f))
    stray = sorted(set(f.entries) - expected)
    if stray:
        raise ArtifactError(f"{path} holds tensors the graph does not use ({', '.join(stray[:5])})", _RECREATE)
    for name in graph.constants:
        entry = f.entries.get(name)
        if entry is None:
            raise ArtifactError(f"{path}: could not read weights (no tensor {name} in the file)", _RECREATE)
        spec = graph.values[name]
        if entry.dtype != spec.dtype or entry.shape != spec.shape:
            actual = f"{entry.dtype}[{'x'.join(map(str, entry.shape)) or 'scalar'}]"
            raise ArtifactError(f"{path}: constant {name} is {actual} in the file, but the graph "
                                f"says {spec.describe()}", f"the tensor header was edited; {_RECREATE}")


def _describe(ios: list) -> str:
    return ", ".join(f"{name}: {'?' if spec is None else spec.describe()}" for name, spec in ios) or "none"


def _dims(dims) -> str:
    return "{" + ", ".join(f"{k} {v.min}..{v.max}" for k, v in dims.items()) + "}"


def read_artifact(path: str | Path, verify: bool = True) -> tuple[Manifest, Program]:
    """Manifest and program of an artifact, every check passed. verify=False skips the hash checks (not the
    structural ones: a graph that does not hang together is refused either way)."""
    path = Path(path)
    with _ArtifactFile(path) as f:
        raw, manifest, graph_json = _read_metadata(f)
        _check_version(path, manifest)
        if verify:
            _verify_hashes(f, raw, manifest, graph_json)
        graph = _parse_graph(path, graph_json)
        try:
            check_graph(graph)
        except ArtifactError as e:
            raise ArtifactError(f"{path}: {e.problem}", e.fix) from None
        _check_consistency(f, manifest, graph)
        try:  # after the tensors are known to be what their specs say: each node against its op
            check_nodes(graph)
        except ArtifactError as e:
            raise ArtifactError(f"{path}: {e.problem}", e.fix) from None
        weights, hashes = f.read_tensors(list(graph.constants))
    if verify:
        bad = sorted(name for name, digest in hashes.items() if manifest.tensor_sha256.get(name) != digest)
        if bad:
            raise ArtifactError(f"{path}: weights do not match their recorded hashes ({', '.join(bad[:5])})", _MODIFIED_FIX)
    return manifest, Program(graph, weights)


def _data_entries(f: _ArtifactFile) -> list[str]:
    """The data files' tensor names, each checked to be a 1-D uint8 tensor within the size limit."""
    names = [k for k in f.entries if k.startswith(DATA_PREFIX)]
    for name in names:
        entry = f.entries[name]
        if entry.dtype != "uint8" or len(entry.shape) != 1 or entry.end - entry.start > MAX_DATA_BYTES:
            raise ArtifactError(f"{f.path}: data file {name[len(DATA_PREFIX):]} is not a 1-D uint8 tensor of at most "
                                f"{MAX_DATA_BYTES >> 20} MiB", _RECREATE)
    return names


def read_data(path: str | Path, content_sha256: str | None = None) -> dict[str, bytes]:
    """The data files stored at conversion (name -> bytes; empty if none), hashes checked; with
    content_sha256, the file must still be the artifact of that hash (the one loaded)."""
    path = Path(path)
    with _ArtifactFile(path) as f:
        raw, manifest, graph_json = _read_metadata(f)
        _check_version(path, manifest)
        _verify_hashes(f, raw, manifest, graph_json)
        if content_sha256 is not None and manifest.content_sha256 != content_sha256:
            raise ArtifactError(f"{path} changed since it was loaded", "load the artifact again")
        names = _data_entries(f)
        tensors, hashes = f.read_tensors(names)
    for name, digest in hashes.items():
        if manifest.tensor_sha256.get(name) != digest:
            raise ArtifactError(f"{path}: stored data file {name[len(DATA_PREFIX):]} does not match its hash", _MODIFIED_FIX)
    return {name[len(DATA_PREFIX):]: bytes(t.numpy().tobytes()) for name, t in tensors.items()}


def read_example_inputs(path: str | Path) -> dict[str, torch.Tensor]:
    """The example inputs stored at conversion (empty if the artifact has none), hashes checked."""
    path = Path(path)
    with _ArtifactFile(path) as f:
        raw, manifest, graph_json = _read_metadata(f)
        _check_version(path, manifest)
        _verify_hashes(f, raw, manifest, graph_json)
        names = [k for k in f.entries if k.startswith(EXAMPLE_PREFIX)]
        tensors, hashes = f.read_tensors(names)
    for name, digest in hashes.items():
        if manifest.tensor_sha256.get(name) != digest:
            raise ArtifactError(f"{path}: stored example input {name[len(EXAMPLE_PREFIX):]} does not match its hash",
                                "the file is corrupt; re-create it with `ipexconvert optimize`")
    return {name[len(EXAMPLE_PREFIX):]: t for name, t in tensors.items()}
