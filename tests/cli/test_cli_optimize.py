"""`ipexconvert optimize`: sources, input declarations, pass selection, accuracy gate, and refusals."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ipexconvert.api import load_artifact
from ipexconvert.artifact import read_example_inputs, read_manifest
from ipexconvert.manifest import Manifest
from ipexconvert.passes import PIPELINES

from ipxc_cli_helpers import FACTORY_MODULE, describe, expect_exit, expect_usage_error, norm

FP32_PIPELINE = PIPELINES["cpu", "fp32"]


def _passes(path) -> list[str]:
    return [p.name for p in read_manifest(path)[0].passes]


# --------------------------------------------------------------------------- successful conversions
def test_example_json_output_has_the_manifest(cnn):
    data, path = cnn["json"], cnn["path"]
    assert data["path"] == str(path)
    assert path.is_file()
    assert data["size_bytes"] == path.stat().st_size
    on_disk, _ = read_manifest(path)
    assert Manifest.model_validate(data["manifest"]).model_dump(exclude={"tensor_sha256"}) == \
        on_disk.model_dump(exclude={"tensor_sha256"})
    manifest = data["manifest"]
    assert manifest["source"]["kind"] == "example" and manifest["source"]["location"] == "tiny-cnn"
    assert [p["name"] for p in manifest["passes"]] == FP32_PIPELINE
    assert [i["name"] for i in manifest["inputs"]] == ["pixel_values"]
    assert [o["name"] for o in manifest["outputs"]] == ["logits"]
    assert manifest["dims"] == {"batch": {"min": 1, "max": 64}}
    assert manifest["accuracy"]["passed"] is True
    assert manifest["accuracy"]["outputs"][0]["max_rel_error"] <= 1e-3
    timing = data["timing_ms"]
    assert timing["rounds"] == 10 and timing["eager_ms"] > 0 and timing["artifact_ms"] > 0


def test_example_human_output(bert):
    text = norm(bert["stdout"])
    manifest, _ = read_manifest(bert["path"])
    for record in manifest.passes:
        assert record.name in text
    assert f"passes ({len(manifest.passes)})" in text
    assert "accuracy last_hidden_state: max rel error" in text
    assert "accuracy pooler_output: max rel error" in text
    assert "latency (median of 10): eager" in text
    assert f"wrote {bert['path']}" in text
    assert "fp32" in text.split("wrote", 1)[1]
    assert "error" not in norm(bert["stderr"])


def test_from_pt2_with_explicit_pass_list(cli, small_pt2, factory, tmp_path):
    out = tmp_path / "from_pt2.ipxc"
    result = cli("optimize", small_pt2, "--trust-pickle", "-o", out, "--passes", "remove_identity, dead_code", "--no-timing")
    expect_exit(result, 0)
    manifest, _ = read_manifest(out)
    assert manifest.source.kind == "export"
    assert manifest.source.location == str(small_pt2)
    assert manifest.source.sha256 is not None and len(manifest.source.sha256) == 64
    assert [p.name for p in manifest.passes] == ["remove_identity", "dead_code"]
    x = read_example_inputs(out)["x"]
    assert tuple(x.shape) == (2, 16)
    with torch.no_grad():
        want = factory.build(hidden=12)(x)
    torch.testing.assert_close(load_artifact(out)(x), want, rtol=1e-5, atol=1e-6)
    assert "latency" not in result.stdout  # --no-timing


def test_from_pt2_default_pipeline(cli, small_pt2, tmp_path):
    out = tmp_path / "default.ipxc"
    expect_exit(cli("optimize", small_pt2, "--trust-pickle", "-o", out, "--no-timing"), 0)
    assert _passes(out) == FP32_PIPELINE


def test_from_safetensors_with_factory_kwargs_and_named_dynamic_dim(cli, small_checkpoint, factory, tmp_path):
    out = tmp_path / "factory.ipxc"
    result = cli("optimize", small_checkpoint, "--model-factory", f"{FACTORY_MODULE}:build",
                 "--model-kwargs", '{"hidden": 12}', "--input", "x:batch,16:float32",
                 "--skip-pass", "fuse_post_ops", "-o", out, "--no-timing")
    expect_exit(result, 0)
    manifest, _ = read_manifest(out)
    assert manifest.source.kind == "state-dict"
    assert manifest.inputs[0].name == "x" and manifest.inputs[0].spec.shape == ["batch", 16]
    assert manifest.outputs[0].spec.shape == ["batch", 4]
    assert manifest.dims["batch"].min == 1 and manifest.dims["batch"].max >= 64
    # --skip-pass takes the pass out of the default pipeline, and its rewrite does not happen
    assert [p.name for p in manifest.passes] == [n for n in FP32_PIPELINE if n != "fuse_post_ops"]
    assert manifest.op_histogram.get("relu") == 1
    model = load_artifact(out)
    reference = factory.build(hidden=12)
    for batch in (1, 5):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            torch.testing.assert_close(model(x), reference(x), rtol=1e-5, atol=1e-6)


def test_checkpoint_that_does_not_fit_the_factory(cli, small_checkpoint, tmp_path):
    # The checkpoint was saved with hidden=12; without --model-kwargs the factory's default (8) does not fit it.
    result = cli("optimize", small_checkpoint, "--model-factory", f"{FACTORY_MODULE}:build",
                 "--input", "x:2,16:float32", "-o", tmp_path / "m.ipxc", "--no-timing")
    expect_usage_error(result, "does not fit the model")
    assert not (tmp_path / "m.ipxc").exists()


def test_example_inputs_file(cli, small_checkpoint, tmp_path):
    inputs = tmp_path / "inputs.safetensors"
    x = torch.randn(3, 16)
    save_file({"x": x}, str(inputs))
    out = tmp_path / "ex.ipxc"
    result = cli("optimize", small_checkpoint, "--model-factory", f"{FACTORY_MODULE}:build",
                 "--model-kwargs", '{"hidden": 12}', "--example-inputs", inputs, "-o", out, "--no-timing")
    expect_exit(result, 0)
    manifest, _ = read_manifest(out)
    assert manifest.inputs[0].spec.shape == [3, 16]  # no --input: shapes are fixed
    assert manifest.dims == {}
    assert torch.equal(read_example_inputs(out)["x"], x)


def test_pickled_module_refused_without_trust(cli, factory, tmp_path):
    pickled = tmp_path / "whole.pt"
    torch.save(factory.build(hidden=12), str(pickled))
    outdir = tmp_path / "out"
    outdir.mkdir()
    result = cli("optimize", pickled, "--input", "x:batch,16:float32", "-o", outdir / "m.ipxc", "--no-timing")
    text = expect_usage_error(result, "--trust-pickle", "arbitrary code", str(pickled))
    assert "refuses" in text
    assert list(outdir.iterdir()) == []


def test_pickled_module_accepted_with_trust(cli, factory, tmp_path):
    pickled = tmp_path / "whole.pt"
    torch.save(factory.build(hidden=12), str(pickled))
    out = tmp_path / "trusted.ipxc"
    result = cli("optimize", pickled, "--trust-pickle", "--input", "x:batch,16:float32", "-o", out, "--no-timing")
    expect_exit(result, 0)
    manifest, _ = read_manifest(out)
    assert manifest.source.kind == "pickle"
    x = torch.randn(4, 16)
    with torch.no_grad():
        torch.testing.assert_close(load_artifact(out)(x), factory.build(hidden=12)(x), rtol=1e-5, atol=1e-6)


def test_bf16(cli, small_pt2, tmp_path):
    out = tmp_path / "bf16.ipxc"
    result = cli("optimize", small_pt2, "--trust-pickle", "--dtype", "bf16", "-o", out, "--json", "--no-timing")
    expect_exit(result, 0)
    data = json.loads(result.stdout)
    assert data["manifest"]["dtype"] == "bf16"
    assert [p["name"] for p in data["manifest"]["passes"]] == PIPELINES["cpu", "bf16"]
    assert data["manifest"]["accuracy"]["passed"] is True
    summary = json.loads(cli("inspect", out, "--json").stdout)
    assert "bfloat16" in summary["weight_bytes_by_dtype"]


# --------------------------------------------------------------------------- refusals and usage errors
def test_unknown_dtype(cli, tmp_path):
    result = cli("optimize", "example:tiny-cnn", "--dtype", "fp8", "-o", tmp_path / "m.ipxc")
    expect_usage_error(result, "'fp8'", "fp32")
    assert list(tmp_path.iterdir()) == []


def test_unknown_skip_pass(cli, tmp_path):
    result = cli("optimize", "example:tiny-cnn", "--skip-pass", "no_such_pass", "-o", tmp_path / "m.ipxc")
    expect_usage_error(result, "unknown pass(es): no_such_pass", "dead_code")
    assert list(tmp_path.iterdir()) == []


def test_unknown_pass_in_pass_list(cli, tmp_path):
    result = cli("optimize", "example:tiny-cnn", "--passes", "dead_code,frobnicate", "-o", tmp_path / "m.ipxc")
    expect_usage_error(result, "frobnicate")


@pytest.mark.parametrize("spec", ["x", "x:3,a-b:float32", "x:3x16:float99", ":3x16:float32", "x:3x16:float32:extra"])
def test_bad_input_syntax(cli, small_checkpoint, tmp_path, spec):
    result = cli("optimize", small_checkpoint, "--model-factory", f"{FACTORY_MODULE}:build",
                 "--input", spec, "-o", tmp_path / "m.ipxc")
    expect_usage_error(result, "--input", "NAME:SHAPE[:DTYPE]")
    assert list(tmp_path.iterdir()) == []


def test_bad_model_kwargs(cli, small_checkpoint, tmp_path):
    result = cli("optimize", small_checkpoint, "--model-factory", f"{FACTORY_MODULE}:build",
                 "--model-kwargs", "{hidden: 12", "--input", "x:2,16", "-o", tmp_path / "m.ipxc")
    expect_usage_error(result, "--model-kwargs is not valid JSON")


@pytest.mark.parametrize("source, fragment", [
    ("missing.pt2", "does not exist"),
    ("missing.safetensors", "does not exist"),
    ("missing_folder", "does not exist"),
    ("example:no-such-model", "no-such-model"),
])
def test_missing_source(cli, tmp_path, source, fragment):
    location = source if source.startswith("example:") else str(tmp_path / source)
    outdir = tmp_path / "out"
    outdir.mkdir()
    result = cli("optimize", location, "-o", outdir / "m.ipxc")
    text = expect_usage_error(result, fragment)
    if not source.startswith("example:"):
        assert location in text
    else:
        assert "tiny-cnn" in text  # lists the available examples
    assert list(outdir.iterdir()) == []


def test_output_path_is_a_folder(cli, small_pt2, tmp_path):
    result = cli("optimize", small_pt2, "--trust-pickle", "-o", tmp_path, "--no-timing")
    expect_usage_error(result, "is a folder")
    assert list(tmp_path.iterdir()) == []


def test_accuracy_failure_writes_nothing(cli, small_pt2, tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "m.ipxc"
    result = cli("optimize", small_pt2, "--trust-pickle", "-o", out, "--max-rel-error", "0", "--min-cosine", "1.1")
    expect_exit(result, 1)
    text = norm(result.stderr)
    assert text.startswith("error:")
    assert "nothing was written" in text
    assert "--max-rel-error" in text  # the fix names the knobs
    assert not out.exists()
    assert list(outdir.iterdir()) == []  # no temp or check files left behind
    assert result.stdout == ""


def test_random_op_is_refused(cli, factory, tmp_path):
    pt2 = tmp_path / "rand.pt2"
    torch.export.save(torch.export.export(factory.WithRand(), (torch.randn(2, 16),)), str(pt2))
    outdir = tmp_path / "out"
    outdir.mkdir()
    result = cli("optimize", pt2, "--trust-pickle", "-o", outdir / "m.ipxc")
    expect_usage_error(result, "aten.rand", "random")
    assert FACTORY_MODULE in norm(result.stderr)  # points at the model's source line
    assert list(outdir.iterdir()) == []


def test_custom_op_without_decomposition_is_refused(cli, factory, tmp_path):
    ckpt = tmp_path / "custom.safetensors"
    save_file(factory.build_custom().state_dict(), str(ckpt))
    outdir = tmp_path / "out"
    outdir.mkdir()
    result = cli("optimize", ckpt, "--model-factory", f"{FACTORY_MODULE}:build_custom",
                 "--input", "x:batch,16:float32", "-o", outdir / "m.ipxc")
    expect_usage_error(result, "ipxc_cli_test.scramble", "cannot be converted")
    assert list(outdir.iterdir()) == [], describe(result)


# --------------------------------------------------------------------------- --config
def test_config_file_with_flags_on_top(cli, small_pt2, tmp_path):
    config = tmp_path / "conv.toml"
    config.write_text('dtype = "bf16"\ntrust_pickle = true\npasses = ["remove_identity", "dead_code"]\n'
                      '[accuracy]\nmin_cosine = 0.98\n')
    out = tmp_path / "cfg.ipxc"
    expect_exit(cli("optimize", small_pt2, "--config", config, "-o", out, "--no-timing"), 0)
    manifest, _ = read_manifest(out)
    assert manifest.dtype == "bf16" and manifest.accuracy.budget_min_cosine == 0.98
    assert _passes(out) == ["remove_identity", "dead_code", "to_bf16"]  # bf16's promise keeps to_bf16
    out2 = tmp_path / "cfg2.ipxc"
    expect_exit(cli("optimize", small_pt2, "--config", config, "--dtype", "fp32", "--target", "cpu:generic",
                    "-o", out2, "--no-timing"), 0)
    manifest2, _ = read_manifest(out2)
    assert (manifest2.dtype, str(manifest2.target)) == ("fp32", "cpu:generic")


def test_bad_config_file_is_a_usage_error(cli, tmp_path):
    config = tmp_path / "bad.json"
    config.write_text('{"dtype": "fp32", "calibration": {"synthetic": 4}}')
    expect_usage_error(cli("optimize", "example:tiny-cnn", "--config", config, "-o", tmp_path / "x.ipxc"),
                       "calibration: int8 settings, but this conversion is fp32")
    assert not (tmp_path / "x.ipxc").exists()
