"""ConversionConfig's weight-only settings: --dtype int4 (always weight-only) and int8 with int8_scheme "weight-only",
the weight_only section (group size, symmetry, LM head, algorithm) with its flat names, calibration text for GPTQ / AWQ,
and the settings refused where they do not apply."""
from __future__ import annotations

import pytest

from ipexconvert.config import ConversionConfig
from ipexconvert.errors import UserInputError
from ipexconvert.passes import pipeline_for


def test_int4_is_weight_only_with_defaults():
    cfg = ConversionConfig.build(dtype="int4")
    assert cfg.weight_only_selected and cfg.weight_only.group_size is None and cfg.weight_only.symmetric
    assert cfg.weight_only.resolved_group_size(4, 896) == 128 and not cfg.weight_only.quantize_lm_head


def test_int8_is_static_unless_weight_only_is_chosen():
    assert not ConversionConfig.build(dtype="int8").weight_only_selected
    cfg = ConversionConfig.build(dtype="int8", int8_scheme="weight-only", group_size="channel")
    assert cfg.weight_only_selected and cfg.weight_only.resolved_group_size(8, 896) == 896
    assert "calibrate" not in pipeline_for(cfg.dtype, weight_only=cfg.weight_only_selected)


def test_decoder_budgets_are_flat_names_of_the_accuracy_section():
    cfg = ConversionConfig.build(dtype="int4", min_cosine=0.98, min_top1_agreement=0.8, max_perplexity_ratio=1.1,
                                 decoder_positions=64)
    assert (cfg.accuracy.min_cosine, cfg.accuracy.min_top1_agreement, cfg.accuracy.max_perplexity_ratio,
            cfg.accuracy.decoder_positions) == (0.98, 0.8, 1.1, 64) and cfg.weight_only.guard
    assert not ConversionConfig.build(dtype="int4", woq={"guard": False}).weight_only.guard


def test_flat_names_merge_into_a_file_section(tmp_path):
    (tmp_path / "c.toml").write_text('dtype = "int4"\n[weight_only]\ngroup_size = 64\nquantize_lm_head = true\n')
    base = ConversionConfig.from_file(tmp_path / "c.toml")
    cfg = ConversionConfig.build(base, woq={"symmetric": False})
    assert (cfg.weight_only.group_size, cfg.weight_only.symmetric, cfg.weight_only.quantize_lm_head) == (64, False, True)
    assert ConversionConfig.build(base, group_size=32).weight_only.group_size == 32


def test_gptq_and_awq_take_calibration_text(tmp_path):
    assert ConversionConfig.build(dtype="int4").weight_only.algorithm == "rtn"
    cfg = ConversionConfig.build(dtype="int4", woq={"algorithm": "gptq"}, calib_text=tmp_path / "t.txt")
    assert cfg.weight_only.algorithm == "gptq" and cfg.calibration.text == tmp_path / "t.txt"
    cfg = ConversionConfig.build(dtype="int8", int8_scheme="weight-only", woq={"algorithm": "awq"}, calib_text="t.txt")
    assert cfg.weight_only.algorithm == "awq" and cfg.weight_only_selected


@pytest.mark.parametrize("fields, problem", [
    ({"dtype": "fp32", "group_size": 32}, "weight_only: settings for --dtype int4 and weight-only int8, but this "
                                          "conversion is fp32"),
    ({"dtype": "int8", "woq": {"symmetric": False}}, "but this conversion is int8 (static)"),
    ({"dtype": "int4", "int8_scheme": "weight-only"}, "int8_scheme: an int8 setting, but this conversion is int4"),
    ({"dtype": "int8", "int8_scheme": "weight-only", "woq": {"symmetric": False}}, "int8 weights are always symmetric"),
    ({"dtype": "int8", "int8_scheme": "weight-only", "calib_synthetic": 2},
     "calibration: static int8 settings, but this conversion is weight-only int8"),
    ({"dtype": "int4", "calib_synthetic": 2}, "calibration: int8 settings, but this conversion is int4"),
    ({"dtype": "int4", "group_size": 48}, "weight_only.group_size"),
    ({"dtype": "int8", "int8_scheme": "dynamic"}, "int8_scheme = 'dynamic'"),
    ({"dtype": "bf16", "min_top1_agreement": 0.8}, "accuracy.min_top1_agreement: budgets of the teacher-forced check"),
    ({"dtype": "int8", "max_perplexity_ratio": 1.1, "calib_synthetic": 2}, "but this conversion is int8"),
    ({"dtype": "int4", "max_perplexity_ratio": 0}, "accuracy.max_perplexity_ratio"),
    ({"dtype": "int4", "calib_text": "t.txt"}, "calibration: int8 settings, but this conversion is int4"),
    ({"dtype": "int4", "woq": {"algorithm": "gptq"}, "calib_synthetic": 2},
     "calibration.synthetic: weight_only.algorithm gptq calibrates on text only"),
    ({"dtype": "int4", "woq": {"algorithm": "awq"}, "calib_text": "t.txt", "qconfig_out": "q.json"},
     "qconfig_out: int8 settings, but this conversion is int4"),
    ({"dtype": "int4", "woq": {"algorithm": "smoothquant"}}, "weight_only.algorithm = 'smoothquant'"),
    ({"dtype": "bf16", "woq": {"algorithm": "gptq"}}, "weight_only: settings for --dtype int4"),
])
def test_settings_where_they_do_not_apply_are_user_input_errors(fields, problem):
    with pytest.raises(UserInputError) as err:
        ConversionConfig.build(**fields)
    assert problem in err.value.problem


def test_bf16_activations_put_the_float_parts_in_bf16_after_quantizing():
    cfg = ConversionConfig.build(dtype="int4", woq={"activations": "bf16"})
    names = pipeline_for(cfg.dtype, weight_only=True, bf16_activations=cfg.weight_only.activations == "bf16")
    at = names.index("weight_only_quantize")
    assert names[at + 1:at + 3] == ["to_bf16", "cache_in_compute_dtype"] and names[-1] == "prepack"
    assert "to_bf16" not in pipeline_for("int4", weight_only=True)  # float32 activations by default
    assert "to_bf16" not in pipeline_for("int4", only=["weight_only_quantize"], weight_only=True,
                                         bf16_activations=True)  # an explicit --passes list is taken as given
