"""`ipexconvert bench`, `check` and `doctor`."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
import torch
from safetensors.torch import load_file, save_file

from ipexconvert.backends.cpu import isa as cpu

from ipxc_cli_helpers import expect_exit, expect_usage_error, norm


# --------------------------------------------------------------------------- bench
def test_bench_json(cli, cnn):
    result = cli("bench", cnn["path"], "--rounds", "3", "--warmup", "1", "--json")
    expect_exit(result, 0)
    report = json.loads(result.stdout)
    assert report["rounds"] == 3 and report["warmup"] == 1
    assert report["batch"] == 1
    assert report["load_ms"] > 0
    assert report["isa"] == cpu.selected_isa()
    assert report["peak_rss_bytes"] > 0
    assert "profile" not in report
    (row,) = report["results"]
    assert row["name"] == "artifact (fp32)"
    assert len(row["samples_ms"]) == 3
    assert row["median_ms"] == pytest.approx(sorted(row["samples_ms"])[1])
    assert row["p90_ms"] >= row["median_ms"] > 0
    assert row["throughput"] == pytest.approx(report["batch"] / (row["median_ms"] / 1e3))


def test_bench_against_eager_with_dim(cli, cnn):
    result = cli("bench", cnn["path"], "--against", "example:tiny-cnn", "--dim", "batch=4",
                 "--rounds", "3", "--warmup", "1", "--json")
    expect_exit(result, 0)
    report = json.loads(result.stdout)
    assert report["batch"] == 4
    assert [r["name"] for r in report["results"]] == ["artifact (fp32)", "eager (fp32)"]
    for row in report["results"]:
        assert len(row["samples_ms"]) == 3
        assert row["throughput"] == pytest.approx(4 / (row["median_ms"] / 1e3))


def test_bench_human_with_profile(cli, cnn):
    result = cli("bench", cnn["path"], "--rounds", "3", "--warmup", "1", "--profile")
    expect_exit(result, 0)
    text = norm(result.stdout)
    assert f"bench {cnn['path'].name} (batch 1," in text
    assert "median ms" in text and "p90 ms" in text and "throughput/s" in text
    assert "artifact (fp32)" in text
    assert "load " in text and "peak RSS" in text
    assert "time per op kind" in text
    assert "conv2d" in text  # tiny-cnn time is mostly convolutions


def test_bench_profile_json(cli, cnn):
    report = json.loads(cli("bench", cnn["path"], "--rounds", "1", "--warmup", "0", "--profile", "--json").stdout)
    assert report["profile"]
    assert all(seconds >= 0 for seconds in report["profile"].values())
    assert any("conv2d" in kernel for kernel in report["profile"])


@pytest.mark.parametrize("dim, fragments", [
    ("nosuch=2", ["no dynamic dim called nosuch", "batch"]),
    ("batch=65", ["outside 1..64"]),
    ("batch=0", ["outside 1..64"]),
    ("batch", ["is not NAME=SIZE"]),
    ("batch=four", ["is not NAME=SIZE"]),
    ("batch=-2", ["is not NAME=SIZE"]),
])
def test_bench_bad_dim(cli, cnn, dim, fragments):
    result = cli("bench", cnn["path"], "--dim", dim, "--rounds", "1", "--warmup", "0")
    expect_usage_error(result, *fragments)
    assert result.stdout == ""


def test_bench_missing_artifact(cli, tmp_path):
    expect_usage_error(cli("bench", tmp_path / "nope.ipxc"), "does not exist")


# --------------------------------------------------------------------------- check
@pytest.fixture(scope="module")
def cnn_golden(cli, cnn, tmp_path_factory):
    path = tmp_path_factory.mktemp("golden") / "cnn_golden.safetensors"
    expect_exit(cli("run", cnn["path"], "-o", path), 0)
    return path


@pytest.fixture(scope="module")
def bert_golden(cli, bert, tmp_path_factory):
    path = tmp_path_factory.mktemp("golden") / "bert_golden.safetensors"
    expect_exit(cli("run", bert["path"], "-o", path), 0)
    return path


def _perturbed(golden, tmp_path, names, scale=1.5):
    """The golden file with some outputs scaled: cosine stays 1, the max error becomes a third of the new max."""
    tensors = load_file(str(golden))
    for name in names:
        tensors[name] = tensors[name] * scale
    path = tmp_path / "perturbed.safetensors"
    save_file(tensors, str(path))
    return path


def test_check_against_example_source(cli, cnn):
    result = cli("check", cnn["path"], "--reference", "example:tiny-cnn")
    expect_exit(result, 0)
    text = norm(result.stdout)
    assert "ok logits: max abs err" in text
    assert "REGRESSION" not in text
    assert text.endswith("PASS")


def test_check_against_golden_file(cli, cnn, cnn_golden):
    result = cli("check", cnn["path"], "--reference", cnn_golden)
    expect_exit(result, 0)
    assert "ok logits: max abs err 0.000e+00" in norm(result.stdout)
    assert norm(result.stdout).endswith("PASS")


def test_check_perturbed_golden_is_a_regression(cli, cnn, cnn_golden, tmp_path):
    perturbed = _perturbed(cnn_golden, tmp_path, ["logits"])
    result = cli("check", cnn["path"], "--reference", perturbed)
    expect_exit(result, 1)
    text = norm(result.stdout)
    assert "REGRESSION logits" in text
    assert text.endswith("FAIL")
    # the same difference passes once the tolerances allow it
    loose = cli("check", cnn["path"], "--reference", perturbed, "--rtol", "0.5")
    expect_exit(loose, 0)


def test_check_json(cli, cnn, cnn_golden, tmp_path):
    ok = json.loads(cli("check", cnn["path"], "--reference", cnn_golden, "--json").stdout)
    assert ok["passed"] is True
    assert ok["rtol"] == 1e-3 and ok["min_cosine"] == 0.99999  # the fp32 defaults
    assert [o["name"] for o in ok["outputs"]] == ["logits"]
    assert ok["outputs"][0]["max_abs_error"] == 0.0 and ok["outputs"][0]["passed"] is True
    result = cli("check", cnn["path"], "--reference", _perturbed(cnn_golden, tmp_path, ["logits"]), "--json",
                 "--rtol", "0.01")
    expect_exit(result, 1)
    bad = json.loads(result.stdout)
    assert bad["passed"] is False and bad["rtol"] == 0.01
    assert bad["outputs"][0]["passed"] is False
    assert bad["outputs"][0]["max_abs_error"] > bad["outputs"][0]["tolerance"]


def test_check_json_stays_valid_when_a_shape_differs(cli, bert, bert_golden, tmp_path):
    tensors = load_file(str(bert_golden))
    tensors["pooler_output"] = tensors["pooler_output"][:, :32].contiguous()
    golden = tmp_path / "shape.safetensors"
    save_file(tensors, str(golden))
    result = cli("check", bert["path"], "--reference", golden, "--json")
    expect_exit(result, 1)

    def reject(constant):
        raise AssertionError(f"--json printed {constant}, which is not JSON")

    report = json.loads(result.stdout, parse_constant=reject)
    by_name = {o["name"]: o for o in report["outputs"]}
    assert by_name["last_hidden_state"]["passed"] is True
    assert by_name["pooler_output"]["passed"] is False
    assert "shape (1, 64) != reference (1, 32)" in by_name["pooler_output"]["message"]


def test_check_junit(cli, bert, bert_golden, tmp_path):
    junit = tmp_path / "reports" / "check.xml"
    perturbed = _perturbed(bert_golden, tmp_path, ["pooler_output"])
    result = cli("check", bert["path"], "--reference", perturbed, "--junit", junit)
    expect_exit(result, 1)
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite"
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"last_hidden_state", "pooler_output"}
    assert all(case.get("classname") == bert["path"].name for case in cases.values())
    assert cases["last_hidden_state"].find("failure") is None
    failure = cases["pooler_output"].find("failure")
    assert failure is not None and failure.get("message") == "outside tolerance"
    assert "max_abs_error=" in failure.text
    text = norm(result.stdout)
    assert "ok last_hidden_state" in text and "REGRESSION pooler_output" in text

    passing = tmp_path / "pass.xml"
    expect_exit(cli("check", bert["path"], "--reference", bert_golden, "--junit", passing), 0)
    suite = ET.parse(passing).getroot()
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert not suite.findall("testcase/failure")


def test_check_golden_missing_an_output(cli, bert, bert_golden, tmp_path):
    tensors = load_file(str(bert_golden))
    del tensors["pooler_output"]
    golden = tmp_path / "partial.safetensors"
    save_file(tensors, str(golden))
    junit = tmp_path / "check.xml"
    result = cli("check", bert["path"], "--reference", golden, "--junit", junit)
    expect_usage_error(result, "lacks output(s) pooler_output", "ipexconvert run -o")
    assert result.stdout == ""


@pytest.mark.parametrize("reference", ["nope.safetensors", "nope.pt2", "nope_folder"])
def test_check_nonexistent_reference(cli, cnn, tmp_path, reference):
    location = str(tmp_path / reference)
    expect_usage_error(cli("check", cnn["path"], "--reference", location), "does not exist", location)


def test_check_unknown_example_reference(cli, cnn):
    expect_usage_error(cli("check", cnn["path"], "--reference", "example:nope"), "nope")


# --------------------------------------------------------------------------- doctor
def test_doctor_human(cli):
    result = cli("doctor")
    expect_exit(result, 0)
    text = norm(result.stdout)
    assert f"torch {torch.__version__}" in text
    assert f"selected_isa: {cpu.selected_isa()}" in text
    assert "supported_isa: " + " ".join(cpu.supported_levels()) in text
    assert f"max_isa_env: {os.environ.get('IPEXCONVERT_MAX_ISA') or 'unset'}" in text


def test_doctor_json(cli):
    result = cli("doctor", "--json")
    expect_exit(result, 0)
    report = json.loads(result.stdout)
    assert report["selected_isa"] in cpu.ISA_LEVELS
    assert report["selected_isa"] in report["supported_isa"]
    assert report["supported_isa"] == cpu.ISA_LEVELS[:len(report["supported_isa"])]  # levels are cumulative
    assert report["selected_isa"] == cpu.selected_isa()
    if not os.environ.get("IPEXCONVERT_MAX_ISA"):
        assert report["selected_isa"] == report["supported_isa"][-1]  # no cap: the best supported level
    assert report["versions"]["torch"] == torch.__version__
    assert report["max_isa_env"] == (os.environ.get("IPEXCONVERT_MAX_ISA") or "unset")
    assert isinstance(report["threads"], int) and report["threads"] >= 1


@pytest.mark.skipif("avx2" not in cpu.supported_levels(), reason="this CPU has no AVX2")
def test_doctor_max_isa_caps_the_selection(cli):
    result = cli("doctor", "--json", env={"IPEXCONVERT_MAX_ISA": "avx2"})
    expect_exit(result, 0)
    report = json.loads(result.stdout)
    assert report["selected_isa"] == "avx2"
    assert report["max_isa_env"] == "avx2"
    assert "avx2" in report["supported_isa"]
    generic = json.loads(cli("doctor", "--json", env={"IPEXCONVERT_MAX_ISA": "generic"}).stdout)
    assert generic["selected_isa"] == "generic"


def test_doctor_bogus_max_isa(cli):
    result = cli("doctor", "--json", env={"IPEXCONVERT_MAX_ISA": "bogus"})
    text = expect_usage_error(result, "IPEXCONVERT_MAX_ISA='bogus'")
    for level in cpu.ISA_LEVELS:
        assert level in text
    assert result.stdout == ""
