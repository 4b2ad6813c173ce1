"""`ipexconvert inspect` on hostile artifacts: a re-hashed edit of the manifest or graph is refused with an
ArtifactError (exit 2) or shown safely, never an uncaught exception (exit 3), a broken stream or restyled output.

Each edit is what the fuzzer found (fuzz/reproducers.py, inspect_*) or a close variant: a quantization record
that is not a QuantPlan, a constant whose dtype is not one, and manifest strings holding lone surrogates,
terminal escape sequences or rich markup.
"""
from __future__ import annotations

import json
import math
import time

import pytest
from typer.testing import CliRunner

import ipexconvert
from ipexconvert.api import load_artifact
from ipexconvert.artifact import read_manifest
from ipexconvert import cli as cli_module
from ipexconvert.cli import app
from ipexconvert.errors import ArtifactError
from ipexconvert.inspection import summarize

from security_helpers import read_parts, rewrite_artifact

HOSTILE_TEXT = "[bold red]styled[/] \x1b[2J\ud800\u202e\r"  # markup, an ANSI clear-screen, a lone surrogate, bidi, CR


@pytest.fixture(scope="module")
def tiny_cnn_int8(security_artifacts):
    """example:tiny-cnn as int8 (a quantization record with every kind of layer entry)."""
    path = security_artifacts / "tiny-cnn.int8.ipxc"
    if not path.exists():
        ipexconvert.optimize("example:tiny-cnn", dtype="int8", calib_synthetic=4, output=path)
    return path


def _inspect(path, *extra):
    for console in (cli_module.out, cli_module.err):  # rich read COLUMNS at import: an xdist worker's 80 would stick
        console.width = 200
    result = CliRunner().invoke(app, ["inspect", str(path), *extra], env={"COLUMNS": "200"})
    # an exception escaping (a UnicodeEncodeError writing the output, say) is an internal error, not exit 2
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code != 3, result.output
    return result


def _expect_refused(path, *fragments):
    for extra in ((), ("--json",)):
        result = _inspect(path, *extra)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        for fragment in fragments:
            assert fragment in result.stderr, result.stderr
    with pytest.raises(ArtifactError):
        summarize(path)


def _first_layer(manifest: dict) -> dict:
    return next(iter(manifest["quantization"]["layers"].values()))


def _edit_first_layer(key, value):
    return lambda m: _first_layer(m).__setitem__(key, value)


def _edit_guard(key, value):
    return lambda m: m["quantization"]["guard"].__setitem__(key, value)


# ---- the quantization record ------------------------------------------------------------------------------------------
BAD_RECORDS = {
    # on a float artifact: the whole record replaced
    "layers_list": ("fp32", lambda m: m.__setitem__("quantization", {"layers": []})),
    "layer_empty": ("fp32", lambda m: m.__setitem__("quantization", {"layers": {"a": {}}})),
    "unknown_field": ("fp32", lambda m: m.__setitem__("quantization", {"layers": {}, "exec": "rm -rf /"})),
    "batches_as_text": ("fp32", lambda m: m.__setitem__("quantization", {"calibration_batches": "4"})),
    # on an int8 artifact: one field of a real record
    "op_bool": ("int8", _edit_first_layer("op", False)),
    "quantized_as_text": ("int8", _edit_first_layer("quantized", "yes")),
    "input_fields_wrong": ("int8", _edit_first_layer("input", {"scale": [1], "zero_point": 0.5, "lo": "x", "hi": None,
                                                               "observer": 1})),
    "zero_point_float": ("int8", lambda m: _first_layer(m)["input"].__setitem__("zero_point", 0.5)),
    "scale_zero": ("int8", lambda m: _first_layer(m)["input"].__setitem__("scale", 0.0)),
    "smoothing_not_object": ("int8", _edit_first_layer("smoothing", "alpha")),
    "guard_not_object": ("int8", lambda m: m["quantization"].__setitem__("guard", [])),
    "guard_missing_fields": ("int8", lambda m: m["quantization"].__setitem__("guard", {"metric": "cosine"})),
    "guard_error_text": ("int8", lambda m: m["quantization"].__setitem__("guard", {
        "metric": "cosine", "meaning": "", "budget": 0.01, "held_out_batches": 1, "passed": True,
        "final_error": "0.001", "rounds": []})),
    "tuning_trials_not_list": ("int8", lambda m: m["quantization"].__setitem__("tuning", {
        "baseline_score": 1.0, "tolerable_loss": 0.01, "met": True, "trials": {}})),
    "layer_name_surrogate": ("int8", lambda m: m["quantization"]["layers"].__setitem__("\ud800[bold]", {"node": 1})),
}


@pytest.mark.parametrize("name", list(BAD_RECORDS))
def test_invalid_quantization_record_is_refused(name, tiny_cnn_artifact, tiny_cnn_int8, tmp_path):
    kind, edit = BAD_RECORDS[name]
    src = tiny_cnn_int8 if kind == "int8" else tiny_cnn_artifact
    path = rewrite_artifact(src, tmp_path / f"{name}.ipxc", edit_manifest=edit)
    _expect_refused(path, "invalid quantization record", str(path))
    # every reader validates the record, so loading refuses it too
    with pytest.raises(ArtifactError, match="invalid quantization record"):
        read_manifest(path)
    with pytest.raises(ArtifactError, match="invalid quantization record"):
        load_artifact(path)


def test_quantization_record_not_an_object_is_refused(tiny_cnn_artifact, tmp_path):
    path = rewrite_artifact(tiny_cnn_artifact, tmp_path / "list.ipxc", edit_manifest=lambda m: m.__setitem__(
        "quantization", [1, 2]))
    _expect_refused(path, "invalid manifest", "quantization")


def test_unedited_int8_record_is_shown(tiny_cnn_int8):
    """The strict record check accepts what the converter writes (the table is drawn)."""
    result = _inspect(tiny_cnn_int8)
    assert result.exit_code == 0, result.output
    assert "quantization by layer" in result.stdout and "int8:" in result.stdout
    load_artifact(tiny_cnn_int8)


ODD_BUT_VALID = {
    # a default plan with no layers on a float artifact: shown, not refused
    "layers_empty": ("fp32", lambda m: m.__setitem__("quantization", {"layers": {}})),
    # JSON null where a NaN was written, and half of an optional pair
    "guard_error_null": ("int8", lambda m: m["quantization"].__setitem__("guard", {
        "metric": "cosine", "meaning": "", "budget": 0.01, "held_out_batches": 1, "passed": False,
        "final_error": None, "rounds": [{"fallback_layers": 0, "error": None}]})),
    "tuning_scores_null": ("int8", lambda m: m["quantization"].__setitem__("tuning", {
        "baseline_score": None, "tolerable_loss": 0.01, "met": False,
        "trials": [{"observer": "minmax", "smoothquant": "off", "fallback_layers": 0, "score": None, "loss": None}]})),
    "weight_scale_max_null": ("int8", _edit_first_layer("weight_scale_max", None)),
    "sample_cosine_mean_null": ("fp32", lambda m: m["accuracy"]["outputs"][0].update(
        sample_cosine_min=0.5, sample_cosine_mean=None)),
}


@pytest.mark.parametrize("name", list(ODD_BUT_VALID))
def test_odd_but_valid_records_are_shown(name, tiny_cnn_artifact, tiny_cnn_int8, tmp_path):
    kind, edit = ODD_BUT_VALID[name]
    src = tiny_cnn_int8 if kind == "int8" else tiny_cnn_artifact
    path = rewrite_artifact(src, tmp_path / f"{name}.ipxc", edit_manifest=edit)
    result = _inspect(path)
    assert result.exit_code == 0, result.output
    assert _inspect(path, "--json").exit_code == 0
    if name != "sample_cosine_mean_null":
        assert "int8:" in result.stdout  # the quantization section is drawn


# ---- the graph --------------------------------------------------------------------------------------------------------
def test_constant_with_unknown_dtype_is_refused(tiny_bert_artifact, tmp_path):
    """inspect runs check_graph before it sums weight bytes by dtype (dtypes.to_torch raised ValueError)."""
    def edit(graph):
        graph["values"]["bert.pooler.dense.bias"]["dtype"] = "object"
    path = rewrite_artifact(tiny_bert_artifact, tmp_path / "dtype.ipxc", edit_graph=edit)
    _expect_refused(path, "the graph is inconsistent", "bert.pooler.dense.bias")


def test_graph_nested_too_deeply_is_refused(tiny_cnn_artifact, tmp_path):
    path = rewrite_artifact(tiny_cnn_artifact, tmp_path / "deep.ipxc",
                            edit_graph=lambda g: g.__setitem__("extra", json.loads("[" * 200 + "]" * 200)))
    _expect_refused(path, "invalid graph")


# ---- strings printed from the artifact --------------------------------------------------------------------------------
def _hostile_strings(manifest: dict) -> None:
    manifest["passes"][0]["name"] = HOSTILE_TEXT
    manifest["source"]["location"] = HOSTILE_TEXT
    manifest["producer"] = HOSTILE_TEXT
    manifest["op_histogram"][HOSTILE_TEXT] = 1
    manifest["fallback_ops"] = [HOSTILE_TEXT]


def _assert_shown_safely(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    assert "\\x1b[2J" in text and "\\ud800" in text and "\\u202e" in text  # shown as escapes
    assert "[bold red]styled[/]" in text  # printed as text, not interpreted as markup


def test_hostile_manifest_strings_are_printed_escaped(tiny_cnn_artifact, tmp_path):
    path = rewrite_artifact(tiny_cnn_artifact, tmp_path / "strings.ipxc", edit_manifest=_hostile_strings)
    result = _inspect(path)
    assert result.exit_code == 0, result.output
    _assert_shown_safely(result.stdout)


def test_hostile_layer_names_in_the_int8_table_are_printed_escaped(tiny_cnn_int8, tmp_path):
    def edit(manifest):
        layer = _first_layer(manifest)
        layer.update(node=HOSTILE_TEXT, quantized=False, fallback_reason=HOSTILE_TEXT)
        layer["input"]["observer"] = HOSTILE_TEXT
        manifest["quantization"]["calibration"] = HOSTILE_TEXT
    path = rewrite_artifact(tiny_cnn_int8, tmp_path / "layers.ipxc", edit_manifest=edit)
    result = _inspect(path)
    assert result.exit_code == 0, result.output
    _assert_shown_safely(result.stdout)
    assert "float (1)" in result.stdout  # the fallback note is numbered under the table


def test_very_long_strings_are_cut_in_the_text_report(tiny_cnn_int8, tmp_path):
    """A 2 MB name in a table cell made rich wrap for minutes (fuzzer: hang in _print_quant_table); the text
    report cuts each string, --json keeps it whole."""
    long = "x" * 2_000_000

    def edit(manifest):
        _first_layer(manifest)["smoothing"] = {"alpha": 0.5, "folded_into": long, "group": [], "factors": []}
        manifest["source"]["location"] = long
    path = rewrite_artifact(tiny_cnn_int8, tmp_path / "long.ipxc", edit_manifest=edit)
    start = time.monotonic()
    result = _inspect(path)
    assert result.exit_code == 0, result.output[-2000:]
    assert time.monotonic() - start < 10
    assert "characters in all)" in result.stdout and len(result.stdout) < 100_000
    data = json.loads(_inspect(path, "--json").stdout)
    assert data["manifest"]["source"]["location"] == long


def test_hostile_strings_in_json_output_round_trip_as_ascii(tiny_cnn_artifact, tmp_path):
    def edit(manifest):
        _hostile_strings(manifest)
        manifest["accuracy"]["outputs"][0]["cosine"] = math.nan  # a NaN literal (Python's json reads it)
    path = rewrite_artifact(tiny_cnn_artifact, tmp_path / "json.ipxc", edit_manifest=edit)
    result = _inspect(path, "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.isascii()

    def no_constants(name):
        raise AssertionError(f"{name} in --json output is not valid JSON")
    data = json.loads(result.stdout, parse_constant=no_constants)
    assert data["manifest"]["producer"] == HOSTILE_TEXT  # escapes, not replacement: the exact string comes back
    assert data["manifest"]["accuracy"]["outputs"][0]["cosine"] is None


@pytest.mark.parametrize("suffix", [HOSTILE_TEXT, HOSTILE_TEXT.replace("\ud800", "")], ids=["surrogate", "escapes"])
def test_error_messages_with_artifact_text_are_printed_escaped(tiny_cnn_artifact, tmp_path, suffix):
    """A refusal whose message quotes the artifact (a constant's name) is printed escaped, not a second crash."""
    def edit(graph):
        name = graph["constants"][0]
        graph["values"][name]["dtype"] = "object"
        graph["values"][name + suffix] = graph["values"].pop(name)
        graph["constants"][0] = name + suffix
        for node in graph["nodes"]:
            node["inputs"] = [name + suffix if i == name else i for i in node["inputs"]]
    path = rewrite_artifact(tiny_cnn_artifact, tmp_path / "error.ipxc", edit_graph=edit)
    result = _inspect(path)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error:") and "the graph is inconsistent" in result.stderr, result.stderr
    assert "\x1b" not in result.stderr and not any(0xD800 <= ord(c) <= 0xDFFF for c in result.stderr)
    assert "\\x1b[2J" in result.stderr and "[bold red]styled[/]" in result.stderr


def test_fuzzer_seed_strings_survive_read_parts(tiny_cnn_artifact, tmp_path):
    """The helper itself keeps a lone surrogate through the rewrite (else the tests above prove nothing)."""
    path = rewrite_artifact(tiny_cnn_artifact, tmp_path / "s.ipxc", edit_manifest=_hostile_strings)
    manifest, *_ = read_parts(path)
    assert manifest["producer"] == HOSTILE_TEXT
