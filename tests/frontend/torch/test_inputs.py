"""--input NAME:SHAPE[:DTYPE] parsing and the example tensors made from it."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.errors import UserInputError
from ipexconvert.frontend.torch.inputs import DEFAULT_DIM_MAX, make_example_inputs, parse_input_arg
from ipexconvert.ir.dynamic_dims import DynamicDim


def test_static_shape_with_x_separators_and_dtype():
    arg = parse_input_arg("pixel_values:1x3x224x224:float32")
    assert arg.name == "pixel_values"
    assert arg.shape == [1, 3, 224, 224]
    assert arg.dtype == "float32"


def test_dtype_defaults_to_float32():
    assert parse_input_arg("x:4x8").dtype == "float32"


def test_named_dims_with_commas_are_dynamic_with_default_range():
    arg = parse_input_arg("input_ids:batch,seq:int64")
    assert arg.shape == [DynamicDim(name="batch", min=1, max=DEFAULT_DIM_MAX), DynamicDim(name="seq", min=1, max=DEFAULT_DIM_MAX)]
    assert arg.dtype == "int64"


def test_named_dims_with_ranges_mixed_with_static():
    arg = parse_input_arg("input_ids:batch[1..64]x128:int64")
    assert arg.shape == [DynamicDim(name="batch", min=1, max=64), 128]


def test_spaces_around_parts_are_ignored():
    arg = parse_input_arg(" x : 2 , seq[2..16] : bfloat16 ")
    assert arg.name == "x"
    assert arg.shape == [2, DynamicDim(name="seq", min=2, max=16)]
    assert arg.dtype == "bfloat16"


def test_dim_names_containing_x_work_in_comma_form():
    """`x` separates dims only when no comma is used, so names like max_len survive."""
    arg = parse_input_arg("ids:batch,max_len:int64")
    assert [d.name for d in arg.shape] == ["batch", "max_len"]


@pytest.mark.parametrize("text, problem", [
    ("pixel_values", "cannot read --input"),
    ("x:", "cannot read --input"),
    (":1x3", "cannot read --input"),
    ("x:1x3:float32:extra", "cannot read --input"),
    ("x:1x3:float99", "unknown dtype 'float99'"),
    ("x:1x-3", "cannot read dimension '-3'"),
    ("x:1x3.5", "cannot read dimension '3.5'"),
    ("x:batch[1..]", "cannot read dimension 'batch[1..]'"),
    ("x:batch[8..2]", "range 8..2 is empty"),
    ("x:1xx3", "cannot read dimension ''"),
])
def test_bad_input_args_say_what_is_wrong_and_how_to_write_it(text: str, problem: str):
    with pytest.raises(UserInputError) as info:
        parse_input_arg(text)
    assert problem in info.value.problem
    assert info.value.fix  # every error carries a fix
    if "range" not in problem:
        assert "NAME:SHAPE[:DTYPE]" in info.value.fix
    else:
        assert "smaller bound first" in info.value.fix


def test_unknown_dtype_error_lists_the_known_ones():
    with pytest.raises(UserInputError) as info:
        parse_input_arg("x:2:complex64")
    assert "bfloat16" in info.value.problem and "int64" in info.value.problem


def test_example_inputs_use_declared_dtypes_and_clamped_example_sizes():
    args = [parse_input_arg("input_ids:batch,seq[2..4]:int64"), parse_input_arg("pixel_values:batch[3..9]x3x4x4")]
    tensors, dynamic = make_example_inputs(args, int_high=7)
    assert tensors["input_ids"].dtype == torch.int64
    assert tuple(tensors["input_ids"].shape) == (2, 4)  # batch -> 2, seq -> 8 clamped to 4
    assert int(tensors["input_ids"].max()) < 7
    assert tuple(tensors["pixel_values"].shape) == (3, 3, 4, 4)  # batch -> 2 clamped up to its min 3
    assert tensors["pixel_values"].dtype == torch.float32
    assert dynamic["input_ids"] == {0: DynamicDim(name="batch", min=1, max=DEFAULT_DIM_MAX), 1: DynamicDim(name="seq", min=2, max=4)}
    assert set(dynamic["pixel_values"]) == {0}
