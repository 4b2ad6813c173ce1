"""The native rope kernel at every ISA level this CPU runs, against the rotate-half formula in float32:
float32 and bfloat16, strided x (a permuted projection), a per-batch or shared cos/sin table, and the
binding's refusals."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.isa import ISA_LEVELS, selected_isa
from ipexconvert.ir.ops._kv_int8 import dequantize_rows, quantize_rows

pytestmark = pytest.mark.skipif(not native_lib.available(), reason="ipexconvert._native is not built")
LEVELS = ISA_LEVELS[:ISA_LEVELS.index(selected_isa()) + 1]


def _formula(x, cos, sin):
    xf, half = x.float(), x.shape[-1] // 2
    return xf * cos.float() + torch.cat([-xf[..., half:], xf[..., :half]], dim=-1) * sin.float()


def _run(x, cos, sin, level):
    out = torch.empty(x.shape, dtype=x.dtype)
    native_lib.raw.rope(x, cos, sin, out, level, 2)
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("table_batch", [1, 2])
def test_rope_matches_the_formula(level, dtype, table_batch):
    g = torch.Generator().manual_seed(0)
    projection = torch.randn(2, 7, 5, 64, generator=g).to(dtype)  # [b, s, heads, d]
    x = projection.permute(0, 2, 1, 3)  # [b, heads, s, d], strided like the graph's view
    cos, sin = torch.randn(table_batch, 1, 7, 64, generator=g), torch.randn(table_batch, 1, 7, 64, generator=g)
    got = _run(x, cos, sin, level)
    want = _formula(x, cos, sin)
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:  # one rounding of the float32 result
        assert torch.equal(got, want.to(torch.bfloat16))


@pytest.mark.parametrize("make, problem", [
    (lambda: (torch.randn(1, 2, 3, 7), torch.randn(1, 1, 3, 7), torch.randn(1, 1, 3, 7)), "must be even"),
    (lambda: (torch.randn(1, 2, 3, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)), "must be \\[1 or 1, 1, 3, 8\\]"),
    (lambda: (torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8).bfloat16()), "dtype"),
    (lambda: (torch.randn(1, 2, 8, 3).transpose(2, 3), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8)), "contiguous last dim"),
])
def test_rope_refuses_what_it_cannot_read(make, problem):
    x, cos, sin = make()
    out = torch.empty(x.shape, dtype=x.dtype)
    with pytest.raises(ValueError, match=problem):
        native_lib.raw.rope(x, cos, sin, out, None, 1)


def _heads(x, d):
    return x.reshape(x.shape[0], x.shape[1], -1, d).permute(0, 2, 1, 3)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("merged", [True, False])
def test_rope_kv_append_rotates_q_and_k_and_writes_the_caches(level, dtype, merged):
    g = torch.Generator().manual_seed(1)
    batch, seq, heads, kv_heads, d, capacity, position = 2, 3, 4, 2, 64, 12, 5
    width = (heads + 2 * kv_heads) * d
    qkv = torch.randn(batch, seq, width + 16, generator=g).to(dtype)[..., 8:8 + width]  # strided rows
    q, k, v = qkv[..., :heads * d], qkv[..., heads * d:(heads + kv_heads) * d], qkv[..., (heads + kv_heads) * d:]
    cos, sin = torch.randn(1, 1, seq, d, generator=g), torch.randn(1, 1, seq, d, generator=g)
    key_cache = torch.randn(batch, kv_heads, capacity, d, generator=g).to(dtype)
    value_cache = torch.randn(batch, kv_heads, capacity, d, generator=g).to(dtype)
    keys_before, values_before = key_cache.clone(), value_cache.clone()
    q_out = torch.empty(batch, heads, seq, d, dtype=dtype)
    sources = [(qkv, 0), (qkv, heads * d), (qkv, (heads + kv_heads) * d)] if merged else [(q, 0), (k, 0), (v, 0)]
    native_lib.raw.rope_kv_append(*sources[0], *sources[1], *sources[2], cos, sin, q_out, key_cache, value_cache,
                                  position, level, 2)
    written = slice(position, position + seq)
    for got, want in ((q_out, _formula(_heads(q, d), cos, sin)), (key_cache[:, :, written], _formula(_heads(k, d), cos, sin))):
        if dtype == torch.float32:
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        else:
            assert torch.equal(got, want.to(torch.bfloat16))
    assert torch.equal(value_cache[:, :, written], _heads(v, d))
    outside = torch.ones(capacity, dtype=torch.bool)
    outside[written] = False
    assert torch.equal(key_cache[:, :, outside], keys_before[:, :, outside])  # nothing else written
    assert torch.equal(value_cache[:, :, outside], values_before[:, :, outside])


@pytest.mark.parametrize("level", LEVELS)
def test_rope_kv_append_rounds_float32_rows_into_a_bfloat16_cache(level):
    """A bf16 cache beside float32 projections (--kv-cache bf16): q stays float32, rope(k) and v are rounded to
    bf16 as they are written (half to even: v, a copy, bit for bit; rope(k) within the float32 math's last bit)."""
    g = torch.Generator().manual_seed(2)
    batch, seq, heads, kv_heads, d, capacity, position = 1, 3, 14, 2, 64, 9, 4
    width = (heads + 2 * kv_heads) * d
    qkv = torch.randn(batch, seq, width, generator=g)
    q, k, v = qkv[..., :heads * d], qkv[..., heads * d:(heads + kv_heads) * d], qkv[..., (heads + kv_heads) * d:]
    cos, sin = torch.randn(1, 1, seq, d, generator=g), torch.randn(1, 1, seq, d, generator=g)
    key_cache, value_cache = (torch.zeros(batch, kv_heads, capacity, d, dtype=torch.bfloat16) for _ in range(2))
    q_out = torch.empty(batch, heads, seq, d)
    native_lib.raw.rope_kv_append(qkv, 0, qkv, heads * d, qkv, (heads + kv_heads) * d, cos, sin, q_out, key_cache,
                                  value_cache, position, level, 2)
    written = slice(position, position + seq)
    torch.testing.assert_close(q_out, _formula(_heads(q, d), cos, sin), rtol=1e-6, atol=1e-6)
    assert torch.equal(value_cache[:, :, written], _heads(v, d).to(torch.bfloat16))
    torch.testing.assert_close(key_cache[:, :, written].float(), _formula(_heads(k, d), cos, sin).to(torch.bfloat16).float(),
                               rtol=2 ** -8, atol=1e-6)
    assert not key_cache[:, :, :position].any() and not value_cache[:, :, position + seq:].any()


def _kv_call(qkv_columns=48, position=0, capacity=4, cache_dtype=torch.float32, seq=2, dtype=torch.float32):
    qkv = torch.randn(1, seq, qkv_columns).to(dtype)
    caches = torch.zeros(1, 1, capacity, 8, dtype=cache_dtype), torch.zeros(1, 1, capacity, 8, dtype=cache_dtype)
    table = torch.randn(1, 1, seq, 8)
    return lambda: native_lib.raw.rope_kv_append(qkv, 0, qkv, 32, qkv, 40, table, table,
                                                 torch.empty(1, 4, seq, 8, dtype=dtype), *caches, position, None, 1)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_kv_append_writes_int8_cache_rows(level, dtype):
    """--kv-cache int8: k rotated and v written as int8 rows (ir/ops/_kv_int8.py): the same call into caches of the
    projections' dtype, then quantized by the reference's rule, gives the same bytes (codes and scales), a zero row
    and a NaN row included; positions outside the written ones untouched."""
    g = torch.Generator().manual_seed(3)
    qkv = (torch.randn(2, 3, 6 * 16, generator=g) * 4).to(dtype)
    qkv[0, 1, 4 * 16:5 * 16] = 0  # the k head of one position: rotated, still zeros
    qkv[1, 2, 5 * 16 + 3] = float("nan")  # one v value
    cos, sin = (torch.randn(2, 1, 3, 16, generator=g) for _ in range(2))
    float_caches = [torch.zeros(2, 1, 9, 16, dtype=dtype) for _ in range(2)]  # (bf16: rope's result rounded to it)
    int8_caches = [torch.full((2, 1, 9, 20), 7, dtype=torch.int8) for _ in range(2)]
    for caches in (float_caches, int8_caches):
        native_lib.raw.rope_kv_append(qkv, 0, qkv, 4 * 16, qkv, 5 * 16, cos, sin, torch.empty(2, 4, 3, 16, dtype=dtype),
                                      *caches, 5, level, 2)
    for f, rows in zip(float_caches, int8_caches):
        want = quantize_rows(f[:, :, 5:8])
        assert torch.equal(rows[:, :, 5:8], want)
        assert torch.equal(rows[:, :, :5], torch.full_like(rows[:, :, :5], 7)) and bool((rows[:, :, 8:] == 7).all())
    assert bool(dequantize_rows(int8_caches[1][1, 0, 7]).isnan().all())
    assert torch.equal(int8_caches[0][0, 0, 6, :16], torch.zeros(16, dtype=torch.int8))


@pytest.mark.parametrize("call, problem", [
    (_kv_call(position=3), "do not fit a cache of 4 positions"),
    (_kv_call(position=-1), "do not fit"),
    (_kv_call(qkv_columns=44), "not within its 44 columns"),
    (_kv_call(dtype=torch.bfloat16), "a cache is q's dtype, bfloat16 beside float32, or int8 rows"),  # wider than q
    (_kv_call(cache_dtype=torch.int8), r"must be \[1, kv_heads, capacity, 12\]"),  # int8 rows: 8 codes and a scale
    (_kv_call(cache_dtype=torch.int16), "a KV cache is float32, bfloat16 or int8 rows"),
])
def test_rope_kv_append_refuses_what_it_cannot_write(call, problem):
    with pytest.raises(ValueError, match=problem):
        call()
