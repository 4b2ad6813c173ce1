"""ir/ops/_kv_int8.py: int8 KV cache rows (head_dim codes, then the float32 scale's 4 bytes) and the ops that read and
write them: the rule we promise (scale = max|x| / 127, round half to even, zero and non-finite rows), the shapes the
ops infer, and their references (kv_append, kv_write, rope_kv_append quantize as they write; sdpa reads code * scale)."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.ir.opdef import SpecError, get_op
from ipexconvert.ir.ops._kv_int8 import dequantize_rows, from_cache, head_dim_of, quantize_rows, row_width, to_cache
from ipexconvert.ir.spec import TensorSpec


def test_a_row_holds_its_codes_then_its_scale():
    x = torch.tensor([[1.0, -2.0, 0.5, 127.0]])
    rows = quantize_rows(x)
    assert rows.dtype == torch.int8 and rows.shape == (1, 8)
    assert rows[0, :4].tolist() == [1, -2, 0, 127]  # scale 1: 0.5 rounds half to even
    assert rows[0, 4:].contiguous().view(torch.float32).item() == 1.0
    assert torch.equal(dequantize_rows(rows), torch.tensor([[1.0, -2.0, 0.0, 127.0]]))


def test_rounding_is_half_to_even_of_x_over_the_scale():
    x = torch.tensor([254.0, 3.0, 5.0, -3.0, -1.0])  # scale 2: 1.5, 2.5, -1.5, -0.5 are ties
    assert quantize_rows(x)[:5].tolist() == [127, 2, 2, -2, 0]


def test_zero_and_non_finite_rows():
    x = torch.tensor([[0.0, 0.0], [1.0, float("nan")], [float("inf"), 1.0]])
    rows = quantize_rows(x)
    assert rows[:, :2].eq(0).all()
    scales = rows[:, 2:].contiguous().view(torch.float32).flatten()
    assert scales[0].item() == 0.0 and scales[1:].isnan().all()
    values = dequantize_rows(rows)
    assert torch.equal(values[0], torch.zeros(2)) and values[1:].isnan().all()


def test_the_error_is_at_most_half_a_step_of_each_rows_scale():
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(0)) * torch.tensor([0.01, 1.0, 300.0]).reshape(3, 1, 1)
    error = (dequantize_rows(quantize_rows(x)) - x).abs()
    step = x.abs().amax(-1, keepdim=True) / 127
    assert bool((error <= step / 2 * (1 + 1e-6)).all())


def test_widths_and_conversions():
    assert row_width("int8", 64) == 68 and head_dim_of("int8", 68) == 64 and row_width("bfloat16", 64) == 64
    x = torch.randn(2, 2, 3, 8)
    assert torch.equal(to_cache(x, torch.int8), quantize_rows(x)) and to_cache(x, torch.bfloat16).dtype == torch.bfloat16
    assert from_cache(quantize_rows(x), torch.bfloat16).shape == x.shape


def _spec(dtype, *shape):
    return TensorSpec(dtype=dtype, shape=list(shape))


def test_ops_infer_int8_cache_shapes():
    kv_append = get_op("kv_append")
    out, = kv_append.infer([_spec("int8", 1, 2, "past", 68), _spec("float32", 1, 2, "seq", 64)], None)
    assert out.dtype == "int8" and out.shape[3] == 68
    with pytest.raises(SpecError, match="does not hold heads"):
        kv_append.infer([_spec("int8", 1, 2, "past", 64), _spec("float32", 1, 2, "seq", 64)], None)
    sdpa = get_op("sdpa")
    attrs = sdpa.parse_attrs({"enable_gqa": True})
    y, = sdpa.infer([_spec("float32", 1, 4, 1, 64), _spec("int8", 1, 2, 9, 68), _spec("int8", 1, 2, 9, 68), None], attrs)
    assert y.dtype == "float32" and y.shape == [1, 4, 1, 64]
    with pytest.raises(SpecError):  # int8 queries are no cache
        sdpa.infer([_spec("int8", 1, 4, 1, 68), _spec("int8", 1, 2, 9, 68), _spec("int8", 1, 2, 9, 68), None], attrs)
    rope = get_op("rope_kv_append")
    q, present, _ = rope.infer([_spec("float32", 1, "seq", 6 * 64), _spec("float32", 1, 1, "seq", 64),
                                _spec("float32", 1, 1, "seq", 64), _spec("int8", 1, 1, "past", 68),
                                _spec("int8", 1, 1, "past", 68)], None)
    assert q.shape[1] == 4 and present.shape[3] == 68 and present.dtype == "int8"


def test_references_quantize_as_they_write_and_attention_reads_the_values():
    g = torch.Generator().manual_seed(1)
    past, new = quantize_rows(torch.randn(1, 2, 3, 16, generator=g)), torch.randn(1, 2, 2, 16, generator=g)
    present = get_op("kv_append").reference([past, new], None, {})
    assert torch.equal(present, torch.cat([past, quantize_rows(new)], dim=2))
    cache = torch.zeros(1, 2, 6, 20, dtype=torch.int8)
    written = get_op("kv_write").reference([cache, new, torch.tensor(3)], None, {})
    assert torch.equal(written[:, :, 3:5], quantize_rows(new)) and written[:, :, :3].eq(0).all()
    q = torch.randn(1, 4, 1, 16, generator=g)
    sdpa = get_op("sdpa")
    attrs = sdpa.parse_attrs({"enable_gqa": True})
    got = sdpa.reference([q, present, present, None], attrs, {})
    values = dequantize_rows(present)
    want = torch.nn.functional.scaled_dot_product_attention(q, values, values, enable_gqa=True)
    torch.testing.assert_close(got, want)
