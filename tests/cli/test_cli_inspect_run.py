"""`ipexconvert inspect` and `ipexconvert run`."""
from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ipexconvert.api import load_artifact
from ipexconvert.artifact import EXAMPLE_PREFIX, GRAPH_KEY, MANIFEST_KEY, read_example_inputs, read_manifest
from ipexconvert.examples import get_example
from ipexconvert.ir import dtypes

from ipxc_cli_helpers import describe, expect_exit, expect_usage_error, norm


def _weight_bytes_on_disk(path) -> dict[str, int]:
    """Bytes per dtype of the stored tensors that are weights (not example inputs), read independently."""
    sizes: dict[str, int] = {}
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():
            if key.startswith(EXAMPLE_PREFIX):
                continue
            t = f.get_tensor(key)
            name = dtypes.to_name(t.dtype)
            sizes[name] = sizes.get(name, 0) + t.numel() * t.element_size()
    return sizes


# --------------------------------------------------------------------------- inspect
def test_inspect_human(cli, cnn):
    result = cli("inspect", cnn["path"])
    expect_exit(result, 0)
    text = norm(result.stdout)
    manifest, _ = read_manifest(cnn["path"])
    assert "signature: (pixel_values: float32[batchx3x64x64]) -> (logits: float32[batchx10])" in text
    assert "dynamic dims: batch 1..64" in text
    assert "source: example tiny-cnn" in text
    for record in manifest.passes:
        assert record.name in text
    for op, count in manifest.op_histogram.items():
        assert re.search(rf"(^|\s){re.escape(op)}\s+\W?\s*{count}(\s|$)", text), (op, count, text)
    expected_fallbacks = ", ".join(manifest.fallback_ops) or "none"
    assert f"fallback ATen ops: {expected_fallbacks}" in text
    assert "weights: float32" in text
    assert "accuracy at conversion, logits: max rel error" in text


def test_inspect_human_lists_fallback_ops(cli, bert):
    manifest, _ = read_manifest(bert["path"])
    assert manifest.fallback_ops, "tiny-bert is expected to need some ATen fallbacks"
    text = norm(cli("inspect", bert["path"]).stdout)
    assert f"fallback ATen ops: {', '.join(manifest.fallback_ops)}" in text
    assert "(input_ids: int64[batchxseq], attention_mask: int64[batchxseq])" in text
    assert "dynamic dims: batch 1..64, seq 2..128" in text


def test_inspect_json(cli, cnn):
    result = cli("inspect", cnn["path"], "--json")
    expect_exit(result, 0)
    data = json.loads(result.stdout)
    manifest, _ = read_manifest(cnn["path"])
    assert data["manifest"]["op_histogram"] == manifest.op_histogram
    assert data["manifest"]["op_histogram"] == cnn["json"]["manifest"]["op_histogram"]
    assert data["manifest"]["graph_sha256"] == manifest.graph_sha256
    assert "tensor_sha256" not in data["manifest"]
    assert data["weight_bytes_by_dtype"] == _weight_bytes_on_disk(cnn["path"])
    assert data["file_bytes"] == cnn["path"].stat().st_size
    assert data["node_count"] == sum(manifest.op_histogram.values())
    assert data["signature"].startswith("(pixel_values: float32[batchx3x64x64])")


def test_inspect_json_is_ascii_and_strict_json(cli, cnn):
    """Every string is escaped (an artifact's text cannot break the output) and there is no NaN literal."""
    result = cli("inspect", cnn["path"], "--json")
    expect_exit(result, 0)
    assert result.stdout.isascii()
    json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))


def test_inspect_shows_an_older_format(cli, cnn, tmp_path):
    """inspect still shows artifacts that `run` refuses as too old (format 1 had no content hash)."""
    with safe_open(str(cnn["path"]), framework="pt") as f:
        metadata = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    manifest = json.loads(metadata[MANIFEST_KEY])
    manifest["format_version"] = 1
    del manifest["content_sha256"]
    metadata[MANIFEST_KEY] = json.dumps(manifest)
    old = tmp_path / "old.ipxc"
    save_file(tensors, str(old), metadata=metadata)
    result = cli("inspect", old)
    expect_exit(result, 0)
    assert "format v1" in norm(result.stdout) and "signature: (pixel_values" in norm(result.stdout)
    assert json.loads(cli("inspect", old, "--json").stdout)["manifest"]["format_version"] == 1
    expect_usage_error(cli("run", old), "older ipexconvert")


def _corrupt(kind: str, cnn_path, tmp_path):
    blob = cnn_path.read_bytes()
    target = tmp_path / f"{kind}.ipxc"
    if kind == "truncated-header":
        target.write_bytes(blob[:100])
    elif kind == "truncated-data":
        target.write_bytes(blob[: len(blob) // 2])
    elif kind == "garbage":
        target.write_text("this is not an artifact at all\n" * 10)
    elif kind == "empty":
        target.write_bytes(b"")
    elif kind == "plain-safetensors":
        save_file({"w": torch.zeros(3)}, str(target))
    elif kind in ("bad-graph", "manifest-not-object"):
        with safe_open(str(cnn_path), framework="pt") as f:
            metadata = dict(f.metadata())
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        if kind == "bad-graph":
            metadata[GRAPH_KEY] = '{"not": "a graph"}'
        else:
            metadata[MANIFEST_KEY] = "[1, 2]"
        save_file(tensors, str(target), metadata=metadata)
    elif kind == "missing":
        pass
    elif kind == "folder":
        target.mkdir()
    return target


@pytest.mark.parametrize("kind, fragment", [
    ("truncated-header", "truncated or corrupt"),
    ("truncated-data", "truncated or corrupt"),
    ("garbage", "truncated or corrupt"),
    ("empty", "truncated or corrupt"),
    ("plain-safetensors", "not an ipexconvert artifact"),
    ("bad-graph", "invalid graph"),
    ("manifest-not-object", "corrupt manifest"),
    ("missing", "does not exist"),
    ("folder", "is a folder"),
])
def test_inspect_bad_file(cli, cnn, tmp_path, kind, fragment):
    path = _corrupt(kind, cnn["path"], tmp_path)
    result = cli("inspect", path)
    expect_usage_error(result, fragment, str(path))
    assert result.stdout == ""
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("kind", ["truncated-data", "bad-graph", "manifest-not-object"])
def test_run_bad_file(cli, cnn, tmp_path, kind):
    path = _corrupt(kind, cnn["path"], tmp_path)
    expect_usage_error(cli("run", path), str(path))


# --------------------------------------------------------------------------- run
def test_run_default_inputs_writes_outputs(cli, cnn, tmp_path):
    out = tmp_path / "sub" / "outputs.safetensors"
    result = cli("run", cnn["path"], "-o", out)
    expect_exit(result, 0)
    text = norm(result.stdout)
    assert "logits: (1, 10) float32" in text
    assert f"wrote {out}" in text
    written = load_file(str(out))
    assert set(written) == {"logits"}
    stored = read_example_inputs(cnn["path"])
    want = load_artifact(cnn["path"]).run_dict(stored)
    torch.testing.assert_close(written["logits"], want["logits"], rtol=0, atol=0)
    example = get_example("tiny-cnn")
    with torch.no_grad():
        eager = example.build()(**stored)
    torch.testing.assert_close(written["logits"], eager, rtol=1e-3, atol=1e-4)
    assert sorted(p.name for p in out.parent.iterdir()) == ["outputs.safetensors"]  # no temp file left


def test_run_inputs_file(cli, cnn, tmp_path):
    pixels = torch.randn(3, 3, 64, 64)
    inputs = tmp_path / "in.safetensors"
    save_file({"pixel_values": pixels}, str(inputs))
    out = tmp_path / "out.safetensors"
    result = cli("run", cnn["path"], "--inputs", inputs, "-o", out)
    expect_exit(result, 0)
    assert "logits: (3, 10) float32" in norm(result.stdout)
    want = load_artifact(cnn["path"])(pixels)
    torch.testing.assert_close(load_file(str(out))["logits"], want, rtol=0, atol=0)


def test_run_two_outputs(cli, bert, tmp_path):
    out = tmp_path / "bert_out.safetensors"
    expect_exit(cli("run", bert["path"], "-o", out), 0)
    written = load_file(str(out))
    want = load_artifact(bert["path"]).run_dict(read_example_inputs(bert["path"]))
    assert set(written) == set(want) == {"last_hidden_state", "pooler_output"}
    for name in want:
        # Two loads, two packed copies of the weights: MKL's AVX2 GEMM may round the last bit
        # differently with another alignment (seen capped to avx2), so not bit-exact.
        torch.testing.assert_close(written[name], want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tensors, fragments", [
    ({"image": torch.randn(1, 3, 64, 64)}, ["lacks input(s) pixel_values", "has: image"]),
    ({"pixel_values": torch.randn(1, 3, 64, 64, dtype=torch.float64)}, ["dtype float64", "expects float32"]),
    ({"pixel_values": torch.randn(1, 3, 32, 64)}, ["dim 2 is 32", "expects 64"]),
    ({"pixel_values": torch.randn(3, 64, 64)}, ["has 3 dims"]),
    ({"pixel_values": torch.randn(65, 3, 64, 64)}, ["outside the range 1..64"]),
], ids=["wrong-name", "wrong-dtype", "wrong-shape", "wrong-rank", "batch-out-of-range"])
def test_run_rejects_bad_inputs(cli, cnn, tmp_path, tensors, fragments):
    inputs = tmp_path / "in.safetensors"
    save_file(tensors, str(inputs))
    outdir = tmp_path / "out"
    result = cli("run", cnn["path"], "--inputs", inputs, "-o", outdir / "o.safetensors")
    expect_usage_error(result, *fragments)
    assert result.stdout == ""
    assert not outdir.exists() or list(outdir.iterdir()) == []


def test_run_wrong_dtype_for_token_ids(cli, bert, tmp_path):
    inputs = tmp_path / "in.safetensors"
    save_file({"input_ids": torch.ones(1, 16), "attention_mask": torch.ones(1, 16, dtype=torch.int64)}, str(inputs))
    expect_usage_error(cli("run", bert["path"], "--inputs", inputs), "input input_ids has dtype float32", "int64")


def test_run_missing_inputs_file(cli, cnn, tmp_path):
    missing = tmp_path / "nope.safetensors"
    expect_usage_error(cli("run", cnn["path"], "--inputs", missing), "does not exist", str(missing))


def test_run_output_is_a_folder(cli, cnn, tmp_path):
    folder = tmp_path / "outdir"
    folder.mkdir()
    result = cli("run", cnn["path"], "-o", folder)
    expect_usage_error(result, "is a folder")
    assert list(tmp_path.iterdir()) == [folder], describe(result)  # no .outdir.tmp left behind
    assert list(folder.iterdir()) == []
