"""The .ipxc artifact: a round trip keeps everything, the file is plain safetensors, writes
leave no temp files, and every kind of damage is an ArtifactError that says what to do."""
from __future__ import annotations

import json
import os
import random

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ipexconvert.artifact import (GRAPH_KEY, MANIFEST_KEY, content_sha256, graph_sha256, read_artifact, read_manifest, rehash,
                                  write_artifact)
from ipexconvert.errors import ArtifactError
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.manifest import FORMAT_VERSION, IOSpec, Manifest, SourceRecord


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(6, 4)
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


@pytest.fixture(scope="module")
def program_and_manifest():
    program = program_from_module(Tiny().eval(), {"x": torch.randn(2, 6)},
                                  {"x": {0: DynamicDim(name="batch", min=1, max=8)}}, output_names=["y"])
    # constants of other dtypes, to check they come back bit-exact
    program.add_constant("table_bf16", torch.randn(3, 5).to(torch.bfloat16))
    program.add_constant("ids_i64", torch.arange(7, dtype=torch.int64) * 1_000_000_007)
    graph = program.graph
    manifest = Manifest(
        producer="ipexconvert test", torch_version=torch.__version__, created_at="2024-01-01T00:00:00+00:00",
        source=SourceRecord(kind="module", location="Tiny"), dtype="fp32",
        inputs=[IOSpec(name=n, spec=graph.values[n]) for n in graph.inputs],
        outputs=[IOSpec(name=n, spec=graph.values[n]) for n in graph.outputs],
        dims=graph.dims, op_histogram=graph.op_histogram())
    return program, manifest


@pytest.fixture
def artifact(tmp_path, program_and_manifest):
    program, manifest = program_and_manifest
    path = tmp_path / "model.ipxc"
    write_artifact(path, program, manifest)
    return path


def _contents(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def rewrite(path, *, tensors=None, metadata=None):
    """Re-save the artifact as a valid safetensors file with some tensors/metadata replaced (None deletes)."""
    old_tensors, old_metadata = _contents(path)
    for key, value in (tensors or {}).items():
        old_tensors.pop(key) if value is None else old_tensors.__setitem__(key, value)
    for key, value in (metadata or {}).items():
        old_metadata.pop(key) if value is None else old_metadata.__setitem__(key, value)
    save_file(old_tensors, str(path), metadata=old_metadata or None)


def _manifest_json(path) -> dict:
    return json.loads(_contents(path)[1][MANIFEST_KEY])


def _graph_json(path) -> dict:
    return json.loads(_contents(path)[1][GRAPH_KEY])


def _set_graph(path, graph: dict, keep_hash_consistent: bool):
    text = json.dumps(graph)
    manifest = _manifest_json(path)
    if keep_hash_consistent:  # every hash recomputed: what someone who edits the file on purpose would do
        manifest = rehash(manifest, text, _contents(path)[0])
    rewrite(path, metadata={GRAPH_KEY: text, MANIFEST_KEY: json.dumps(manifest)})


# ---- round trip ----------------------------------------------------------------------------------------------------


def test_round_trip_keeps_manifest_graph_and_weights(artifact, program_and_manifest):
    program, manifest = program_and_manifest
    written_manifest, _ = read_manifest(artifact)
    read_back_manifest, read_back = read_artifact(artifact)

    assert read_back_manifest == written_manifest
    assert read_back_manifest.model_copy(update={"graph_sha256": "", "tensor_sha256": {}, "content_sha256": ""}) == manifest
    assert read_back.graph == program.graph
    assert set(read_back.weights) == set(program.graph.constants)
    for name in program.graph.constants:
        assert read_back.weights[name].dtype == program.weights[name].dtype
        assert torch.equal(read_back.weights[name], program.weights[name]), name


def test_write_returns_the_manifest_with_hashes_filled_in(tmp_path, program_and_manifest):
    program, manifest = program_and_manifest
    final = write_artifact(tmp_path / "m.ipxc", program, manifest)
    assert final.graph_sha256 == graph_sha256(program.graph.model_dump_json())
    assert set(final.tensor_sha256) == set(program.graph.constants)
    tensors, metadata = _contents(tmp_path / "m.ipxc")
    headers = {name: (str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in tensors.items()}
    assert final.content_sha256 == content_sha256(json.loads(metadata[MANIFEST_KEY]), metadata[GRAPH_KEY], headers)
    assert manifest.graph_sha256 == "" and manifest.content_sha256 == ""  # the caller's manifest is not modified


def test_artifact_is_a_plain_safetensors_file(artifact, program_and_manifest):
    program, _ = program_and_manifest
    tensors, metadata = _contents(artifact)
    assert set(tensors) == set(program.graph.constants)
    for name, tensor in tensors.items():
        assert torch.equal(tensor, program.weights[name])
    assert set(metadata) == {MANIFEST_KEY, GRAPH_KEY}
    assert _manifest_json(artifact)["format"] == "ipexconvert"
    assert _manifest_json(artifact)["format_version"] == FORMAT_VERSION


def test_no_temp_files_left_after_a_successful_write(tmp_path, program_and_manifest):
    program, manifest = program_and_manifest
    out = tmp_path / "nested" / "dir" / "model.ipxc"
    write_artifact(out, program, manifest)
    write_artifact(out, program, manifest)  # overwriting too
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.ipxc"]


def test_failed_write_leaves_no_temp_file_and_keeps_the_old_artifact(artifact, program_and_manifest, monkeypatch):
    import ipexconvert.artifact as artifact_module

    def refuse(tensors, filename, metadata=None):
        raise RuntimeError("safetensors refused the tensors")  # before writing a byte

    program, manifest = program_and_manifest
    before = artifact.read_bytes()
    monkeypatch.setattr(artifact_module, "save_file", refuse)
    with pytest.raises(RuntimeError):
        write_artifact(artifact, program, manifest)
    assert sorted(p.name for p in artifact.parent.iterdir()) == [artifact.name]
    assert artifact.read_bytes() == before


def test_write_interrupted_mid_file_leaves_no_temp_file(tmp_path, program_and_manifest, monkeypatch):
    import ipexconvert.artifact as artifact_module

    def disk_full(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"\0" * 100)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(artifact_module, "save_file", disk_full)
    program, manifest = program_and_manifest
    with pytest.raises(OSError, match="No space left"):
        write_artifact(tmp_path / "model.ipxc", program, manifest)
    assert list(tmp_path.iterdir()) == []


def test_verify_false_skips_the_hash_checks(artifact):
    tensors_before, _ = _contents(artifact)
    name = sorted(tensors_before)[0]
    rewrite(artifact, tensors={name: tensors_before[name] + 1})
    with pytest.raises(ArtifactError):
        read_artifact(artifact)
    _, program = read_artifact(artifact, verify=False)
    assert torch.equal(program.weights[name], tensors_before[name] + 1)


# ---- damage ----------------------------------------------------------------------------------------------------------


def _remove(path):
    path.unlink()


def _make_directory(path):
    path.unlink()
    path.mkdir()


def _truncate_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _truncate_tail(path):
    data = path.read_bytes()
    path.write_bytes(data[:-10])


def _truncate_to_4_bytes(path):
    path.write_bytes(path.read_bytes()[:4])


def _empty(path):
    path.write_bytes(b"")


def _random_bytes(path):
    path.write_bytes(random.Random(0).randbytes(4096))


def _plausible_header_size_then_junk(path):
    path.write_bytes((64).to_bytes(8, "little") + b"{not json at all" * 8)


def _strip_our_metadata(path):
    rewrite(path, metadata={MANIFEST_KEY: None, GRAPH_KEY: None})


def _foreign_metadata(path):
    rewrite(path, metadata={MANIFEST_KEY: None, GRAPH_KEY: None, "format": "pt"})


def _manifest_not_json(path):
    rewrite(path, metadata={MANIFEST_KEY: "{this is not json"})


def _manifest_json_but_not_an_object(path):
    rewrite(path, metadata={MANIFEST_KEY: "[1, 2, 3]"})


def _manifest_missing_fields(path):
    manifest = _manifest_json(path)
    del manifest["inputs"]
    rewrite(path, metadata={MANIFEST_KEY: json.dumps(manifest)})


def _format_version_from_the_future(path):
    manifest = _manifest_json(path)
    manifest["format_version"] = FORMAT_VERSION + 1
    manifest["some_future_field"] = {"x": 1}  # a newer format may add fields this version does not know
    rewrite(path, metadata={MANIFEST_KEY: json.dumps(manifest)})


def _format_version_from_the_past(path):
    manifest = _manifest_json(path)
    manifest["format_version"] = FORMAT_VERSION - 1
    del manifest["content_sha256"]  # version 1 had no content hash
    rewrite(path, metadata={MANIFEST_KEY: json.dumps(manifest)})


def _manifest_edited(path):
    manifest = _manifest_json(path)
    manifest["dims"]["batch"]["max"] = 1 << 20
    rewrite(path, metadata={MANIFEST_KEY: json.dumps(manifest)})


def _header_size_absurd(path):
    data = bytearray(path.read_bytes())
    data[:8] = (1 << 40).to_bytes(8, "little")
    path.write_bytes(bytes(data))


def _tensor_data_overlapping(path):
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    first = next(k for k in header if k != "__metadata__")
    begin, end = header[first]["data_offsets"]
    header[first]["data_offsets"] = [begin + 4, end + 4]  # same size, shifted over its neighbour
    text = json.dumps(header, separators=(",", ":")).encode().ljust(size)
    assert len(text) == size
    path.write_bytes(bytes(data[:8]) + text + bytes(data[8 + size:]))


def _graph_tampered(path):
    graph = _graph_json(path)
    relu = next(n for n in graph["nodes"] if n["op"] == "relu")
    relu["op"] = "sigmoid"
    _set_graph(path, graph, keep_hash_consistent=False)


def _graph_invalid_with_matching_hash(path):
    _set_graph(path, {"inputs": "not a list"}, keep_hash_consistent=True)


def _tensor_bytes_flipped(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last byte belongs to the last tensor's data
    path.write_bytes(bytes(data))


def _tensor_replaced(path):
    tensors, _ = _contents(path)
    name = sorted(tensors)[0]
    rewrite(path, tensors={name: torch.zeros_like(tensors[name])})


def _tensor_removed(path):
    tensors, _ = _contents(path)
    rewrite(path, tensors={"fc.weight": None})


def _tensor_hash_removed(path):
    manifest = _manifest_json(path)
    del manifest["tensor_sha256"]["fc.bias"]
    rewrite(path, metadata={MANIFEST_KEY: json.dumps(manifest)})


DAMAGE = [
    (_remove, "does not exist", "ipexconvert optimize"),
    (_make_directory, "is a folder", "the .ipxc file"),
    (_truncate_half, "truncated or corrupt", "re-create"),
    (_truncate_tail, "truncated or corrupt", "re-create"),
    (_truncate_to_4_bytes, "truncated or corrupt", "re-create"),
    (_empty, "truncated or corrupt", "re-create"),
    (_random_bytes, "truncated or corrupt", "re-create"),
    (_plausible_header_size_then_junk, "truncated or corrupt", "re-create"),
    (_strip_our_metadata, "not an ipexconvert artifact", "convert the model first"),
    (_foreign_metadata, "not an ipexconvert artifact", "convert the model first"),
    (_manifest_not_json, "corrupt manifest", "re-create"),
    (_manifest_json_but_not_an_object, "corrupt manifest", "re-create"),
    (_manifest_missing_fields, "invalid manifest", "re-create"),
    (_format_version_from_the_future, f"format version {FORMAT_VERSION + 1}, newer than", "upgrade ipexconvert"),
    (_format_version_from_the_past, "written by an older ipexconvert", "re-convert it"),
    (_manifest_edited, "do not match their recorded hash (content_sha256", "do not edit"),
    (_header_size_absurd, "over the 100 MiB limit", "re-create"),
    (_tensor_data_overlapping, "truncated or corrupt", "re-create"),
    (_graph_tampered, "graph does not match its recorded hash", "do not edit"),
    (_graph_invalid_with_matching_hash, "invalid graph", "re-create"),
    (_tensor_bytes_flipped, "do not match their recorded hashes", "re-create"),
    (_tensor_replaced, "do not match their recorded hashes", "re-create"),
    (_tensor_removed, "could not read weights", "re-create"),
    (_tensor_hash_removed, "do not match their recorded hashes (fc.bias)", "re-create"),
]


@pytest.mark.parametrize("damage, problem, fix", DAMAGE, ids=[d[0].__name__.strip("_") for d in DAMAGE])
def test_damaged_artifact_is_an_artifact_error_with_a_fix(artifact, damage, problem, fix):
    damage(artifact)
    with pytest.raises(ArtifactError) as info:
        read_artifact(artifact)
    assert problem in info.value.problem
    assert str(artifact) in info.value.problem
    assert fix in info.value.fix


@pytest.mark.parametrize("damage, problem, fix", DAMAGE, ids=[d[0].__name__.strip("_") for d in DAMAGE])
def test_load_artifact_reports_damage_as_artifact_error_too(artifact, damage, problem, fix):
    from ipexconvert.api import load_artifact

    damage(artifact)
    with pytest.raises(ArtifactError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_artifact(artifact)


def test_older_format_is_shown_by_inspect_but_not_loaded(artifact):
    _format_version_from_the_past(artifact)
    manifest, _ = read_manifest(artifact)  # `ipexconvert inspect` reads it
    assert manifest.format_version == FORMAT_VERSION - 1
    with pytest.raises(ArtifactError, match="older ipexconvert"):
        read_artifact(artifact, verify=False)  # refused even unverified: it has no content hash to check


def test_write_records_the_current_format_version(tmp_path, program_and_manifest):
    program, manifest = program_and_manifest
    final = write_artifact(tmp_path / "m.ipxc", program, manifest.model_copy(update={"format_version": 1}))
    assert final.format_version == FORMAT_VERSION == _manifest_json(tmp_path / "m.ipxc")["format_version"]


def test_each_loaded_weight_owns_its_memory(artifact):
    """Private copies, one allocation each (a weight a kernel repacks is freed on its own); that the file
    can change under a loaded model is tested in a child process in tests/security/test_artifact_integrity.py."""
    _, program = read_artifact(artifact)
    storages = {t.untyped_storage().data_ptr() for t in program.weights.values()}
    assert len(storages) == len(program.weights)
    for tensor in program.weights.values():
        assert tensor.untyped_storage().nbytes() == tensor.nbytes


# ---- graphs that are well-formed but may not run ------------------------------------------------------------------------


def _rewrite_first_node(path, **changes):
    graph = _graph_json(path)
    graph["nodes"][0].update(changes)
    _set_graph(path, graph, keep_hash_consistent=True)


@pytest.mark.parametrize("target, reason", [("aten.add_.Tensor", "mutates"), ("aten.rand.default", "random"),
                                            ("aten.new_zeros.default", "not a core ATen op")])
def test_artifact_naming_a_refused_aten_op_does_not_load(artifact, target, reason):
    from ipexconvert.api import load_artifact

    _rewrite_first_node(artifact, op="aten", attrs={"target": target, "args": [{"$in": 0}, {"$in": 0}], "kwargs": {}})
    with pytest.raises(ArtifactError) as info:
        load_artifact(artifact)
    assert target in info.value.problem and reason in info.value.problem
    assert str(artifact) in info.value.problem


def test_artifact_naming_an_unknown_op_does_not_load(artifact):
    from ipexconvert.api import load_artifact

    _rewrite_first_node(artifact, op="fancy_future_op", attrs={})
    with pytest.raises(ArtifactError, match="fancy_future_op") as info:
        load_artifact(artifact)
    assert str(artifact) in info.value.problem
    assert "upgrade" in info.value.fix


def test_artifact_with_bad_op_attrs_does_not_load(artifact):
    from ipexconvert.api import load_artifact

    _rewrite_first_node(artifact, attrs={"post_ops": "not a list"})
    with pytest.raises(ArtifactError, match="post_ops"):
        load_artifact(artifact)


def test_constants_sharing_memory_are_written_as_copies(tmp_path, program_and_manifest):
    """Two constant names over one storage (an exporter's shared zero bias after `.float()`): safetensors
    would refuse them; each is written, and read back equal."""
    program, manifest = program_and_manifest
    from ipexconvert.ir import Program
    shared = Program(program.graph.model_copy(deep=True), dict(program.weights))
    base = torch.arange(8, dtype=torch.float32)
    first = shared.add_constant("shared_a", base)
    second = shared.add_constant("shared_b", base)      # the very same tensor
    third = shared.add_constant("shared_c", base[2:6])   # a view into it
    path = tmp_path / "shared.ipxc"
    write_artifact(path, shared, manifest)
    _, read = read_artifact(path)
    assert torch.equal(read.weights[first], base) and torch.equal(read.weights[second], base)
    assert torch.equal(read.weights[third], base[2:6])
