"""ConversionConfig (ipexconvert/config.py): one typed object built by the CLI and the Python API, read from
JSON or TOML, with keyword/flag overrides; every mistake a UserInputError naming the field."""
from __future__ import annotations

import json

import pytest
import torch

from ipexconvert import optimize
from ipexconvert.config import ConversionConfig
from ipexconvert.errors import UserInputError
from ipexconvert.quant.options import QuantOptions
from small_models import Small
from ipexconvert.target import Target


def test_defaults_are_a_portable_fp32_conversion():
    cfg = ConversionConfig()
    assert (cfg.dtype, cfg.target, cfg.passes, cfg.calibration.given()) == ("fp32", Target(), None, [])


def test_flat_names_reach_into_sections_and_override_a_base():
    base = ConversionConfig.build(dtype="int8", calib_synthetic=2, quant=QuantOptions(observer="minmax", max_error=0.02))
    cfg = ConversionConfig.build(base, quant=QuantOptions(smoothquant="off"), min_cosine=0.99, target="cpu:avx2")
    assert cfg.quantization.observer == "minmax" and cfg.quantization.max_error == 0.02  # kept from the base
    assert cfg.quantization.smoothquant == "off"                                          # set on top
    assert (cfg.accuracy.min_cosine, cfg.calibration.synthetic, cfg.target) == (0.99, 2, Target(level="avx2"))


@pytest.mark.parametrize("fields, problem", [
    ({"dtype": "int9"}, "dtype = 'int9': Input should be"),
    ({"dtype": "fp32", "calib_synthetic": 3}, "calibration: int8 settings, but this conversion is fp32"),
    ({"dtype": "int8", "calib_synthetic": 3, "calib_text": "x.txt"}, "more than one calibration source"),
    ({"target": "cpu:avx9"}, "'avx9' is not a CPU ISA level"),
    ({"max_rel_error": -1}, "accuracy.max_rel_error = -1: Input should be greater than or equal to 0"),
    ({"passes_typo": ["x"]}, "passes_typo: Extra inputs are not permitted"),
])
def test_mistakes_are_user_input_errors_naming_the_field(fields, problem):
    with pytest.raises(UserInputError) as err:
        ConversionConfig.build(**fields)
    assert problem in err.value.problem


def test_json_and_toml_files_give_the_same_config(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"dtype": "int8", "target": "cpu", "calibration": {"synthetic": 2},
                                                 "quantization": {"observer": "histogram"}, "skip_passes": ["merge_linears"]}))
    (tmp_path / "c.toml").write_text('dtype = "int8"\ntarget = "cpu"\nskip_passes = ["merge_linears"]\n'
                                     '[calibration]\nsynthetic = 2\n[quantization]\nobserver = "histogram"\n')
    assert ConversionConfig.from_file(tmp_path / "c.json") == ConversionConfig.from_file(tmp_path / "c.toml")


@pytest.mark.parametrize("text, problem", [("[1, 2]", "not a table of settings"), ("{nope", "could not be read"),
                                           ('{"dtype": "bf16", "extra": 1}', "extra = 1: Extra inputs")])
def test_bad_files_are_user_input_errors(tmp_path, text, problem):
    (tmp_path / "c.json").write_text(text)
    with pytest.raises(UserInputError) as err:
        ConversionConfig.from_file(tmp_path / "c.json")
    assert problem in err.value.problem
    with pytest.raises(UserInputError, match="is not a file"):
        ConversionConfig.from_file(tmp_path / "missing.json")


def test_optimize_takes_a_config_file_and_keyword_overrides(tmp_path):
    (tmp_path / "c.toml").write_text('dtype = "bf16"\nskip_passes = ["merge_linears"]\n[accuracy]\nmin_cosine = 0.99\n')
    x = {"x": torch.randn(2, 8)}
    from_file = optimize(Small().eval(), x, tmp_path / "c.toml", output=tmp_path / "a.ipxc")
    assert from_file.manifest.dtype == "bf16" and from_file.config.skip_passes == ["merge_linears"]
    assert "merge_linears" not in [p.name for p in from_file.manifest.passes]
    assert from_file.manifest.accuracy.budget_min_cosine == 0.99
    overridden = optimize(Small().eval(), x, tmp_path / "c.toml", dtype="fp32", output=tmp_path / "b.ipxc")
    assert overridden.manifest.dtype == "fp32" and overridden.config.skip_passes == ["merge_linears"]


def test_int8_pipelines_hold_the_calibrate_stage_and_the_manifest_records_passes_only(tmp_path):
    from ipexconvert.passes import PIPELINES, pipeline_for

    assert "calibrate" in PIPELINES["cpu", "int8"]
    assert pipeline_for("int8", ["fold_batchnorm", "quantize", "prepack"]) == ["fold_batchnorm", "calibrate", "quantize",
                                                                                 "prepack"]
    with pytest.raises(UserInputError, match="only applies to --dtype int8"):
        pipeline_for("fp32", ["calibrate", "prepack"])
    result = optimize(Small().eval(), {"x": torch.randn(2, 8)}, dtype="int8", calib_synthetic=2,
                      output=tmp_path / "q.ipxc")
    names = [p.name for p in result.manifest.passes]
    assert "calibrate" not in names and "quantize" in names
