"""`ipexconvert optimize --woq-algorithm gptq|awq`: the usage errors, found before any model is loaded (a conversion
with them runs in tests/quant/test_weight_only_inc.py)."""
from __future__ import annotations

import pytest

from ipxc_cli_helpers import expect_usage_error


def test_gptq_without_calibration_text_is_a_usage_error(cli, tmp_path):
    out = tmp_path / "t.ipxc"
    result = cli("optimize", "example:tiny-llama", "--dtype", "int4", "--woq-algorithm", "gptq", "-o", out)
    text = expect_usage_error(result, "--woq-algorithm gptq chooses codes from the activations of calibration text",
                              "none was given", "fix: pass --calib-text FILE")
    assert "--woq-algorithm rtn" in text and not out.exists()


def test_calibration_text_where_nothing_reads_it_is_a_usage_error(cli, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("some text\n")
    result = cli("optimize", "example:tiny-llama", "--dtype", "int4", "--calib-text", text, "-o", tmp_path / "t.ipxc")
    expect_usage_error(result, "rounds to nearest (rtn)", "add --woq-algorithm gptq")


@pytest.mark.parametrize("args, fragment", [
    (["--dtype", "fp32", "--woq-algorithm", "gptq"], "weight_only: settings for --dtype int4 and weight-only int8"),
    (["--dtype", "int4", "--woq-algorithm", "hqq"], "weight_only.algorithm = 'hqq'"),
    (["--dtype", "int8", "--weight-only", "--woq-algorithm", "awq", "--calib-synthetic", "2"],
     "calibration.synthetic: weight_only.algorithm awq calibrates on text only"),
])
def test_woq_algorithm_settings_that_do_not_apply(cli, tmp_path, args, fragment):
    expect_usage_error(cli("optimize", "example:tiny-llama", *args, "-o", tmp_path / "t.ipxc"), fragment)
