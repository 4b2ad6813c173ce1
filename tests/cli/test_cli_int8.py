"""`ipexconvert optimize --dtype int8` flags, its summary, the calibration progress bar, and `inspect` of int8 artifacts.

Conversions use small models (the factory's two-layer MLP, example:tiny-cnn, a one-layer Hugging Face BERT
built here with MiniLM's tokenizer) so that each takes seconds. Refusals are checked to leave no artifact.
"""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from rich.console import Console
from safetensors.torch import save_file

import ipexconvert.cli as cli_module
from ipexconvert.artifact import read_manifest
from ipexconvert.quant.plan import QuantPlan

from ipxc_cli_helpers import FACTORY_MODULE, describe, expect_exit, expect_usage_error, norm

INT8_FLAG_EXAMPLES = [  # one valid use of every int8-only flag (for the "wrong dtype" refusal)
    ["--calib", "calib.safetensors"], ["--calib-text", "sentences.txt"], ["--calib-synthetic", "4"],
    ["--observer", "minmax"], ["--smoothquant", "off"], ["--max-error", "0.05"], ["--guard-metric", "cosine"],
    ["--no-guard"], ["--qconfig-out", "q.json"], ["--qconfig-in", "q.json"], ["--float-dtype", "float32"],
    ["--tune"], ["--eval-fn", "pkg.mod:score"], ["--tolerable-loss", "0.01"],
]


# --------------------------------------------------------------------------- helpers
def _mlp_int8(cli, checkpoint, out, *extra):
    """The factory MLP (x: [batch, 16] -> [batch, 4]) from a safetensors checkpoint, as int8."""
    return cli("optimize", checkpoint, "--model-factory", f"{FACTORY_MODULE}:build", "--model-kwargs", '{"hidden": 12}',
               "--input", "x:batch,16:float32", "--dtype", "int8", "-o", out, "--no-timing", *extra)


def _batches(count: int, rows: int = 4, scale: float = 1.0, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(rows, 16, generator=g) * scale for _ in range(count)]


def _save_batches(path, batches, name: str = "x"):
    """Several batches in one file: keys NAME.0, NAME.1, ..."""
    save_file({f"{name}.{i}": b for i, b in enumerate(batches)}, str(path))
    return path


def _plan(path) -> QuantPlan:
    manifest, _ = read_manifest(path)
    assert manifest.dtype == "int8"
    return QuantPlan.model_validate(manifest.quantization)


def _scales(plan: QuantPlan) -> dict:
    return {name: (layer.input.scale, layer.input.zero_point, layer.input.lo, layer.input.hi,
                   layer.weight_scale_min, layer.weight_scale_max) for name, layer in plan.layers.items()}


def _expect_refused(result, outdir, *fragments) -> str:
    """A usage error (exit 2, error + fix) and nothing written to outdir."""
    text = expect_usage_error(result, *fragments)
    assert list(outdir.iterdir()) == [], describe(result)
    return text


@pytest.fixture
def outdir(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture(scope="session")
def tiny_hf_bert(tmp_path_factory):
    """A one-layer, 32-wide Hugging Face BertModel folder with MiniLM's tokenizer files (same vocabulary),
    sentences to calibrate on, and example inputs tokenized from other sentences."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer, BertConfig, BertModel

    from ipexconvert.examples.minilm import SENTENCES, model_folder

    try:
        source = model_folder()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        pytest.skip(str(e))
    root = tmp_path_factory.mktemp("hf")
    folder = root / "tiny-bert-hf"
    vocab = len((source / "vocab.txt").read_text(encoding="utf-8").splitlines())
    config = BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    torch.manual_seed(0)
    BertModel(config).eval().save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(source / name, folder / name)
    sentences = root / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES[:20]) + "\n\n", encoding="utf-8")  # a blank line is skipped
    # The final accuracy check runs on the example inputs; random token ids (the folder's default) are far
    # from the text the model was calibrated on, so give it real sentences too (static shape [4, 32]).
    encoded = AutoTokenizer.from_pretrained(str(folder))(SENTENCES[20:24], padding="max_length", max_length=32,
                                                       truncation=True, return_tensors="pt")
    example = root / "example.safetensors"
    save_file({"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}, str(example))
    return {"folder": folder, "sentences": sentences, "example": example}


@pytest.fixture(scope="session")
def hf_int8(cli, tiny_hf_bert, tmp_path_factory) -> dict:
    """tiny_hf_bert as int8, calibrated on text with a fixed SmoothQuant alpha."""
    out = tmp_path_factory.mktemp("hf-int8") / "bert.int8.ipxc"
    result = cli("optimize", tiny_hf_bert["folder"], "--dtype", "int8", "--calib-text", tiny_hf_bert["sentences"],
                 "--example-inputs", tiny_hf_bert["example"], "--smoothquant", "0.5", "-o", out, "--no-timing")
    expect_exit(result, 0)
    return {"path": out, "stdout": result.stdout, "stderr": result.stderr}


@pytest.fixture(scope="session")
def cnn_synthetic(cli, tmp_path_factory) -> dict:
    """example:tiny-cnn as int8 on random calibration data, without the guard, other ops in float32."""
    out = tmp_path_factory.mktemp("cnn-int8") / "tiny-cnn.int8.ipxc"
    result = cli("optimize", "example:tiny-cnn", "--dtype", "int8", "--calib-synthetic", "4", "--no-guard",
                 "--float-dtype", "float32", "-o", out, "--no-timing")
    expect_exit(result, 0)
    return {"path": out, "stdout": result.stdout, "stderr": result.stderr}


# --------------------------------------------------------------------------- calibration sources
def test_calib_file_with_observer_and_summary(cli, small_checkpoint, tmp_path):
    calib = _save_batches(tmp_path / "calib.safetensors", _batches(5))
    out = tmp_path / "mlp.int8.ipxc"
    result = _mlp_int8(cli, small_checkpoint, out, "--calib", calib, "--observer", "minmax")
    expect_exit(result, 0)
    plan = _plan(out)
    assert plan.calibration == "calib.safetensors (5 batches)"
    assert plan.calibration_synthetic is False
    assert (plan.calibration_batches, plan.held_out_batches) == (4, 1)
    # The family default for this (non-transformer) model is histogram: minmax must come from the flag.
    assert plan.observer == "minmax"
    assert {layer.input.observer for layer in plan.layers.values()} == {"minmax"}
    assert set(plan.layers) == {"linear", "linear_1"}

    text = norm(result.stdout)
    quantized, kept = len(plan.quantized_layers()), len(plan.fallback_layers())
    assert f"int8: {quantized} layer(s) quantized, {kept} kept in float (observer minmax" in text
    assert f"accuracy guard: {plan.guard['metric']} error {plan.guard['final_error']:.4g}, budget {plan.guard['budget']:g}" in text
    assert "passed" in text.split("accuracy guard:", 1)[1]
    assert "calibration: calib.safetensors (5 batches): 4 batches to calibrate, 1 held out" in text
    assert "SmoothQuant: off (not a transformer)" in text
    assert f"wrote {out}" in text and "int8)" in text
    assert "WARNING" not in result.output


def test_calib_folder_json_guard_flags_and_progress_bar(cli, small_checkpoint, tmp_path, monkeypatch):
    folder = tmp_path / "calib"
    folder.mkdir()
    batches = _batches(6)
    _save_batches(folder / "a.safetensors", batches[:3])
    for i, b in enumerate(batches[3:]):  # one batch per file, plain input names
        save_file({"x": b}, str(folder / f"b{i}.safetensors"))
    (folder / "README.txt").write_text("other files are ignored\n")
    # A terminal console for stderr, so the live progress display is actually drawn (and captured).
    monkeypatch.setattr(cli_module, "err", Console(stderr=True, force_terminal=True, width=200))
    out = tmp_path / "mlp.int8.ipxc"
    result = _mlp_int8(cli, small_checkpoint, out, "--calib", folder, "--observer", "percentile",
                       "--guard-metric", "relative", "--max-error", "0.5", "--json")
    expect_exit(result, 0)
    data = json.loads(result.stdout)
    on_disk, _ = read_manifest(out)
    assert data["manifest"]["quantization"] == on_disk.quantization
    plan = _plan(out)
    assert plan.calibration == "calib/ (4 files, 6 batches)"
    assert (plan.calibration_batches, plan.held_out_batches) == (5, 1)
    assert plan.observer == "percentile"
    assert plan.guard["metric"] == "relative" and plan.guard["budget"] == 0.5
    # One bar per calibration stage, ticked once per batch (the last frame is drawn when the display stops).
    progress = result.stderr
    assert "calibrating activation ranges" in progress and "5/5 batches" in progress
    assert "measuring per-layer sensitivity" in progress and "1/1 batches" in progress


def test_calib_text_on_a_hugging_face_folder(hf_int8):
    plan = _plan(hf_int8["path"])
    assert plan.calibration == "sentences.txt (20 lines, tokenized)"
    assert plan.calibration_synthetic is False
    assert plan.calibration_batches + plan.held_out_batches == 5  # 20 lines in batches of 4 (the static batch size)
    # SmoothQuant at the fixed alpha from --smoothquant (auto searches a grid and picked others for this model)
    assert plan.smoothquant == "0.5"
    smoothed = [layer for layer in plan.layers.values() if layer.smoothing is not None]
    assert smoothed and {layer.smoothing.alpha for layer in smoothed} == {0.5}
    text = norm(hf_int8["stdout"])
    assert f"SmoothQuant: 0.5: {len(smoothed)} of {len(plan.layers)} layers smoothed, alpha 0.5" in text
    assert "calibration: sentences.txt (20 lines, tokenized)" in text


def test_calib_synthetic_warns_and_is_recorded(cnn_synthetic):
    plan = _plan(cnn_synthetic["path"])
    assert plan.calibration_synthetic is True
    assert plan.calibration == "synthetic (4 random batches)"
    warning = norm(cnn_synthetic["stderr"])
    assert warning.startswith("WARNING: calibrating INT8 on RANDOM synthetic inputs"), warning
    text = norm(cnn_synthetic["stdout"])
    assert "WARNING: calibrated on RANDOM synthetic inputs" in text
    # --no-guard and --float-dtype float32 from the same run
    assert plan.guard is None and "accuracy guard: off" in text
    assert plan.float_dtype == "float32" and "other ops float32" in text
    assert plan.observer == "histogram"  # the CNN family default


def test_missing_calibration_names_the_three_flags(cli, small_checkpoint, outdir):
    result = _mlp_int8(cli, small_checkpoint, outdir / "m.ipxc")
    _expect_refused(result, outdir, "needs calibration data", "--calib", "--calib-text", "--calib-synthetic")


def test_two_calibration_sources_refused(cli, small_checkpoint, tmp_path, outdir):
    calib = _save_batches(tmp_path / "calib.safetensors", _batches(2))
    result = _mlp_int8(cli, small_checkpoint, outdir / "m.ipxc", "--calib", calib, "--calib-synthetic", "2")
    _expect_refused(result, outdir, "more than one calibration source")


def _bad_calibration(kind, tmp_path):
    path = tmp_path / "calib.safetensors"
    if kind == "wrong-shape":
        _save_batches(path, _batches(2)[:1] + [torch.randn(4, 15)])
    elif kind == "wrong-dtype":
        save_file({"x": torch.zeros(4, 16, dtype=torch.int64)}, str(path))
    elif kind == "wrong-input-name":
        save_file({"y": torch.randn(4, 16)}, str(path))
    elif kind == "extra-input":
        save_file({"x": torch.randn(4, 16), "mask": torch.ones(4, 16)}, str(path))
    elif kind == "empty-file":
        path.write_bytes(b"")
    elif kind == "no-tensors":
        save_file({}, str(path))
    elif kind == "not-safetensors":
        path.write_text("x,1,2,3\n")
    elif kind == "empty-folder":
        path = tmp_path / "calib"
        path.mkdir()
        (path / "notes.txt").write_text("no batches here\n")
    elif kind == "missing":
        pass
    return path


@pytest.mark.parametrize("kind, fragments", [
    ("wrong-shape", ["batch 1", "x"]),
    ("wrong-dtype", ["x", "int64", "float32"]),
    ("wrong-input-name", ["missing x", "unexpected y"]),
    ("extra-input", ["unexpected mask"]),
    ("empty-file", ["not a readable safetensors file"]),
    ("no-tensors", ["holds no tensors"]),
    ("not-safetensors", ["not a readable safetensors file"]),
    ("empty-folder", ["has no *.safetensors files"]),
    ("missing", ["does not exist"]),
])
def test_bad_calibration_data(cli, small_checkpoint, tmp_path, outdir, kind, fragments):
    path = _bad_calibration(kind, tmp_path)
    result = _mlp_int8(cli, small_checkpoint, outdir / "m.ipxc", "--calib", path)
    text = _expect_refused(result, outdir, *fragments)
    assert str(path) in text
    assert "internal error" not in text


def test_calibration_missing_one_of_two_inputs(cli, tiny_hf_bert, tmp_path, outdir):
    calib = tmp_path / "ids_only.safetensors"
    save_file({"input_ids": torch.ones(2, 8, dtype=torch.int64)}, str(calib))
    result = cli("optimize", tiny_hf_bert["folder"], "--dtype", "int8", "--calib", calib, "-o", outdir / "m.ipxc", "--no-timing")
    _expect_refused(result, outdir, "missing attention_mask", "input_ids, attention_mask")


def test_calib_text_without_a_tokenizer(cli, small_checkpoint, tmp_path, outdir):
    text = tmp_path / "s.txt"
    text.write_text("a sentence\n")
    result = _mlp_int8(cli, small_checkpoint, outdir / "m.ipxc", "--calib-text", text)
    _expect_refused(result, outdir, "--calib-text needs the model's tokenizer")


# --------------------------------------------------------------------------- qconfig export / import
def test_qconfig_out_then_in_reuses_the_scales(cli, small_checkpoint, tmp_path):
    calib = _save_batches(tmp_path / "calib.safetensors", _batches(4))
    first, qconfig = tmp_path / "first.ipxc", tmp_path / "plans" / "q.json"
    qconfig.parent.mkdir()
    result = _mlp_int8(cli, small_checkpoint, first, "--calib", calib, "--qconfig-out", qconfig)
    expect_exit(result, 0)
    assert f"wrote {qconfig}" in norm(result.stdout)
    exported = json.loads(qconfig.read_text())
    assert exported["layers"] == _plan(first).model_dump(mode="json")["layers"]

    # Calibration data 10x larger would give other ranges: equal scales prove they come from the file.
    # One scale edited by hand must come through as well.
    exported["layers"]["linear_1"]["input"]["scale"] = 0.0123
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(exported))
    louder = _save_batches(tmp_path / "louder.safetensors", _batches(4, scale=10.0, seed=1))
    second = tmp_path / "second.ipxc"
    expect_exit(_mlp_int8(cli, small_checkpoint, second, "--calib", louder, "--qconfig-in", edited), 0)
    want, got = _scales(_plan(first)), _scales(_plan(second))
    assert got["linear"] == want["linear"]
    assert got["linear_1"][0] == 0.0123 and got["linear_1"][1:] == want["linear_1"][1:]


@pytest.mark.parametrize("kind, fragment", [
    ("not-json", "not a valid ipexconvert qconfig"),
    ("truncated", "not a valid ipexconvert qconfig"),
    ("negative-scale", "scale"),
    ("unknown-field", "colour"),
    ("missing", "does not exist"),
])
def test_invalid_qconfig_in(cli, small_checkpoint, tmp_path, outdir, kind, fragment):
    good = QuantPlan(layers={"linear": {"node": "linear", "op": "linear",
                                        "input": {"scale": 0.01, "zero_point": 128, "lo": -1.0, "hi": 1.0}}})
    text = good.model_dump_json()
    path = tmp_path / "q.json"
    if kind == "not-json":
        path.write_text("observer: minmax\n")
    elif kind == "truncated":
        path.write_text(text[: len(text) // 2])
    elif kind == "negative-scale":
        path.write_text(text.replace('"scale":0.01', '"scale":-0.01'))
    elif kind == "unknown-field":
        path.write_text(text.replace('"observer":', '"colour":"red","observer":', 1))
    calib = _save_batches(tmp_path / "calib.safetensors", _batches(2))
    result = _mlp_int8(cli, small_checkpoint, outdir / "m.ipxc", "--calib", calib, "--qconfig-in", path)
    text = _expect_refused(result, outdir, fragment, str(path))
    assert "internal error" not in text


# --------------------------------------------------------------------------- flag validation (before any slow work)
@pytest.mark.parametrize("flag", INT8_FLAG_EXAMPLES, ids=lambda f: f[0])
def test_int8_flags_need_dtype_int8(cli, outdir, flag):
    result = cli("optimize", "example:tiny-cnn", "--dtype", "bf16", *flag, "-o", outdir / "m.ipxc")
    _expect_refused(result, outdir, flag[0], "only apply to --dtype int8", "--dtype bf16")


def test_int8_flags_with_default_dtype_list_every_flag(cli, outdir):
    result = cli("optimize", "example:tiny-cnn", "--calib-synthetic", "4", "--observer", "minmax", "-o", outdir / "m.ipxc")
    _expect_refused(result, outdir, "--calib-synthetic, --observer only apply to --dtype int8", "--dtype fp32")


@pytest.mark.parametrize("args, fragments", [
    (["--smoothquant", "2.0"], ["--smoothquant 2.0", "[0, 1]"]),
    (["--smoothquant", "strong"], ["--smoothquant strong", "auto, off"]),
    (["--max-error", "0"], ["--max-error 0", "greater than 0"]),
    (["--max-error", "-1"], ["--max-error -1.0", "greater than 0"]),
    (["--guard-metric", "mse"], ["--guard-metric mse", "top1"]),
    (["--float-dtype", "float16"], ["--float-dtype float16", "bfloat16"]),
    (["--observer", "mean"], ["--observer mean", "histogram, minmax, percentile"]),
    (["--calib-synthetic", "0"], ["--calib-synthetic 0", "at least 1"]),
])
def test_invalid_int8_flag_values(cli, outdir, args, fragments):
    result = cli("optimize", "example:tiny-cnn", "--dtype", "int8", *args, "-o", outdir / "m.ipxc")
    text = _expect_refused(result, outdir, *fragments)
    assert "validation error" not in text.lower()  # pydantic's own report is translated, not passed through


def test_qconfig_out_is_a_folder(cli, tmp_path, outdir):
    result = cli("optimize", "example:tiny-cnn", "--dtype", "int8", "--calib-synthetic", "2", "--qconfig-out", tmp_path,
                 "-o", outdir / "m.ipxc")
    _expect_refused(result, outdir, "--qconfig-out", "is a folder")


# --------------------------------------------------------------------------- inspect
def test_inspect_int8_table(cli, cnn_synthetic):
    result = cli("inspect", cnn_synthetic["path"])
    expect_exit(result, 0)
    text = norm(result.stdout)
    plan = _plan(cnn_synthetic["path"])
    assert "quantization by layer" in text
    assert f"int8: {len(plan.quantized_layers())} layer(s) quantized" in text
    assert "calibration: synthetic (4 random batches)" in text
    for name, layer in plan.layers.items():  # one row per layer, in its own words
        a = layer.input
        row = (f"{name} {layer.op} int8 {a.scale:.3g} {a.zero_point} [{a.lo:.3g}, {a.hi:.3g}] {a.observer} "
               f"{layer.weight_scale_min:.3g} .. {layer.weight_scale_max:.3g} - {layer.sensitivity:.3g}")
        assert row in text, (row, text)


def test_inspect_int8_shows_smoothing(cli, hf_int8):
    result = cli("inspect", hf_int8["path"])
    expect_exit(result, 0)
    text = norm(result.stdout)
    plan = _plan(hf_int8["path"])
    smoothed = {name: layer.smoothing for name, layer in plan.layers.items() if layer.smoothing is not None}
    assert smoothed
    for name, smoothing in smoothed.items():
        assert f"{name} linear " in text and f"0.5 -> {smoothing.folded_into}" in text
    assert "SmoothQuant: 0.5:" in text


def test_inspect_lists_layers_kept_in_float_with_reasons(cli, small_checkpoint, tmp_path):
    calib = _save_batches(tmp_path / "calib.safetensors", _batches(3))
    qconfig = tmp_path / "q.json"
    first = tmp_path / "first.ipxc"
    expect_exit(_mlp_int8(cli, small_checkpoint, first, "--calib", calib, "--qconfig-out", qconfig), 0)
    edited = json.loads(qconfig.read_text())
    edited["layers"]["linear"].update(quantized=False, fallback_reason="kept in float by hand")
    qconfig.write_text(json.dumps(edited))
    out = tmp_path / "edited.ipxc"
    result = _mlp_int8(cli, small_checkpoint, out, "--calib", calib, "--qconfig-in", qconfig)
    expect_exit(result, 0)
    assert "float: linear: kept in float by hand" in norm(result.stdout)  # the optimize summary
    text = norm(cli("inspect", out).stdout)
    assert "linear linear float (1)" in text
    assert "(1) linear: kept in float by hand" in text
    assert "linear_1 linear int8" in text


def test_inspect_json_has_the_quantization_as_is(cli, cnn_synthetic):
    result = cli("inspect", cnn_synthetic["path"], "--json")
    expect_exit(result, 0)
    data = json.loads(result.stdout)
    manifest, _ = read_manifest(cnn_synthetic["path"])
    assert data["manifest"]["quantization"] == manifest.quantization
    assert data["manifest"]["quantization"]["calibration_synthetic"] is True


def test_inspect_float_artifact_has_no_quantization_section(cli, cnn):
    result = cli("inspect", cnn["path"])
    expect_exit(result, 0)
    assert "quantization" not in result.stdout and "int8" not in result.stdout
    assert json.loads(cli("inspect", cnn["path"], "--json").stdout)["manifest"]["quantization"] is None


# ---- --tune ------------------------------------------------------------------------------------
TUNE_MODULE = "ipxc_tune_eval_for_tests"
SCORE_ON_FIXED_INPUT = (
    "import torch\n"
    "CALLS = []\n"
    "def score(model):\n"
    "    x = torch.linspace(-1, 1, 2 * 3 * 64 * 64).reshape(2, 3, 64, 64)\n"
    "    CALLS.append(model.manifest.dtype)\n"
    "    return float(model(x).float().abs().sum())\n")
ONLY_FP32_SCORES = "def score(model):\n    return 1.0 if model.manifest.dtype == 'fp32' else 0.0\n"


def _tune(cli, out, module, *extra):
    return cli("optimize", "example:tiny-cnn", "--dtype", "int8", "--calib-synthetic", "3", "--tune",
               "--eval-fn", f"{module}:score", "-o", out, "--no-timing", *extra)


def test_tune_with_eval_fn_records_trials(cli, tmp_path, outdir, monkeypatch):
    """--tune: the eval function sees the fp32 model first, then int8 candidates; trials land in the manifest."""
    (tmp_path / f"{TUNE_MODULE}.py").write_text(SCORE_ON_FIXED_INPUT)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = outdir / "t.ipxc"
    result = _tune(cli, out, TUNE_MODULE, "--tolerable-loss", "0.5")
    expect_exit(result, 0)
    import importlib

    calls = importlib.import_module(TUNE_MODULE).CALLS
    assert calls[0] == "fp32" and "int8" in calls[1:], calls
    tuning = _plan(out).tuning
    assert tuning["met"] and tuning["trials"] and tuning["baseline_score"] > 0
    assert "tuning" in norm(result.output)


def test_tune_unreachable_tolerance_writes_nothing(cli, tmp_path, outdir, monkeypatch):
    """A score int8 never reaches: accuracy error (exit 1) after every setting and fallback, no artifact."""
    monkeypatch.syspath_prepend(str(tmp_path))
    out = outdir / "t.ipxc"
    _expect_refused(_tune(cli, out, f"{TUNE_MODULE}_never"), outdir, "cannot import --eval-fn")
    (tmp_path / f"{TUNE_MODULE}_never.py").write_text(ONLY_FP32_SCORES)
    result = _tune(cli, out, f"{TUNE_MODULE}_never")
    expect_exit(result, 1)
    assert "tuning found no int8 configuration" in norm(result.output)
    assert list(outdir.iterdir()) == []


def test_tune_flags_need_each_other(cli, outdir):
    base = ("optimize", "example:tiny-cnn", "--dtype", "int8", "--calib-synthetic", "2", "-o", outdir / "t.ipxc")
    _expect_refused(cli(*base, "--tune"), outdir, "--tune needs --eval-fn")
    _expect_refused(cli(*base, "--eval-fn", "a:b"), outdir, "only apply with --tune")
