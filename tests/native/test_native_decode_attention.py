"""The native decode_attention kernel at every ISA level this CPU runs, against torch's attention: grouped
query heads, a cache viewed inside a bigger buffer, masks (broadcast, fully masked rows give zeros), bf16,
and the binding's refusals."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.isa import ISA_LEVELS, selected_isa
from ipexconvert.ir.ops._kv_int8 import dequantize_rows, quantize_rows

pytestmark = pytest.mark.skipif(not native_lib.available(), reason="ipexconvert._native is not built")
LEVELS = ISA_LEVELS[:ISA_LEVELS.index(selected_isa()) + 1]


def _run(q, k, v, mask, scale, level, threads=2):
    b, h, s, d = q.shape
    out = torch.empty(b, s, h, d, dtype=q.dtype).permute(0, 2, 1, 3)
    native_lib.raw.decode_attention(q, k, v, out, mask, scale, level, threads)
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("q_len", [1, 3])
def test_matches_torch_attention(level, dtype, q_len):
    g = torch.Generator().manual_seed(q_len)
    q = torch.randn(2, 6, q_len, 64, generator=g).to(dtype)
    buffer = torch.randn(2, 2, 40, 64, generator=g).to(dtype)  # the cache: 29 of 40 positions in use
    k, v = buffer[:, :, :29], torch.randn(2, 2, 40, 64, generator=g).to(dtype)[:, :, :29]
    mask = torch.zeros(2, 1, q_len, 29)
    mask[1, ..., 20:] = float("-inf")
    got = _run(q, k, v, mask, 0.125, level)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, scale=0.125, enable_gqa=True)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", [(1, 4, 0, 32), (0, 4, 1, 32), (1, 0, 1, 32)], ids=["no-queries", "no-batch", "no-heads"])
def test_nothing_to_compute(level, shape):
    """No query rows, batch or heads: an empty output and no call of the kernel, which divides by them (a SIGFPE the
    fuzzer found in a decoder artifact whose seq range was edited to admit 0)."""
    q = torch.randn(shape)
    kv_heads = 2 if shape[1] else 1
    k = v = torch.randn(shape[0], kv_heads, 5, 32)
    mask = torch.zeros(shape[0], 1, shape[2], 5)
    assert _run(q, k, v, mask, 0.125, level).shape == shape
    length = torch.tensor([3])
    out = torch.empty(shape[0], shape[2], shape[1], 32).permute(0, 2, 1, 3)
    native_lib.raw.decode_attention(q, k, v, out, None, 0.125, level, 2, length)  # the recorded form, too
    with pytest.raises(IndexError, match="do not fit"):  # whose length cell is still checked
        native_lib.raw.decode_attention(q, k, v, out, None, 0.125, level, 2, torch.tensor([6]))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("length", [16, 530])
def test_long_caches(level, dtype, length):
    """Qwen2-0.5B's decode shape, with rows prefetched 32 ahead: a cache shorter than that distance, and one of 530
    positions, inside a bigger buffer."""
    g = torch.Generator().manual_seed(length)
    q = torch.randn(1, 14, 1, 64, generator=g).to(dtype)
    k, v = (torch.randn(1, 2, length + 7, 64, generator=g).to(dtype)[:, :, :length] for _ in range(2))
    mask = torch.randn(1, 1, 1, length, generator=g)
    got = _run(q, k, v, mask, 0.125, level)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, scale=0.125, enable_gqa=True)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("head_dim", [64, 128, 80])
@pytest.mark.parametrize("q_len", [1, 2])
def test_a_bfloat16_cache_beside_float32_queries(level, head_dim, q_len):
    """--kv-cache bf16: float32 q and output, bf16 k and v, widened exactly: float32 attention over the bf16 values."""
    g = torch.Generator().manual_seed(head_dim + q_len)
    q = torch.randn(1, 14, q_len, head_dim, generator=g)
    k, v = (torch.randn(1, 2, 80, head_dim, generator=g).to(torch.bfloat16)[:, :, :61] for _ in range(2))
    mask = torch.randn(1, 1, q_len, 61, generator=g)
    got = _run(q, k, v, mask, head_dim ** -0.5, level)
    assert got.dtype == torch.float32
    want = F.scaled_dot_product_attention(q, k.float(), v.float(), attn_mask=mask, scale=head_dim ** -0.5, enable_gqa=True)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("head_dim", [64, 128, 80])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("q_len", [1, 2])
def test_an_int8_cache_beside_float_queries(level, head_dim, dtype, q_len):
    """--kv-cache int8: rows of head_dim codes and a float32 scale (ir/ops/_kv_int8.py), read in place from a buffer
    with spare positions: float32 attention over the values the rows hold (code * scale), one row all zeros."""
    g = torch.Generator().manual_seed(head_dim + q_len)
    q = torch.randn(1, 14, q_len, head_dim, generator=g).to(dtype)
    floats = [torch.randn(1, 2, 80, head_dim, generator=g) * 3 for _ in range(2)]
    floats[0][0, 1, 7] = 0.0  # a row of zeros: scale 0, codes 0
    k, v = (quantize_rows(f)[:, :, :61] for f in floats)
    assert k.dtype == torch.int8 and k.shape[-1] == head_dim + 4 and not k.is_contiguous()
    mask = torch.randn(1, 1, q_len, 61, generator=g)
    got = _run(q, k, v, mask, head_dim ** -0.5, level)
    assert got.dtype == dtype
    want = F.scaled_dot_product_attention(q.float(), dequantize_rows(k), dequantize_rows(v), attn_mask=mask,
                                          scale=head_dim ** -0.5, enable_gqa=True)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), want, rtol=tolerance, atol=tolerance)


def test_int8_cache_rows_need_room_for_their_scale():
    q, k = torch.randn(1, 2, 1, 16), torch.zeros(1, 1, 5, 16, dtype=torch.int8)
    with pytest.raises(ValueError, match="head_dim codes and a 4-byte scale"):
        _run(q, k, k, None, 0.25, selected_isa())


def test_a_cache_wider_than_the_queries_is_refused():
    q, k, v = torch.randn(1, 2, 1, 16).to(torch.bfloat16), torch.randn(1, 1, 5, 16), torch.randn(1, 1, 5, 16)
    with pytest.raises(ValueError, match="narrower than q, not wider"):
        _run(q, k, v, None, 0.25, selected_isa())


# (query heads, kv heads, head size): the register paths (64, 128; groups bigger than the heads one pass keeps
# in registers), a size that is no whole number of vectors (80), one query head per kv head.
@pytest.mark.parametrize("heads, kv_heads, head_dim", [(14, 2, 64), (16, 2, 128), (4, 1, 80), (3, 3, 32)])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("level", LEVELS)
def test_head_groups_sizes_and_thread_slices(heads, kv_heads, head_dim, threads, dtype, level):
    """Every head of a group gets its own query, per-head mask row and output, however the group is sliced
    among the threads."""
    g = torch.Generator().manual_seed(heads + head_dim)
    q = torch.randn(1, heads, 1, head_dim, generator=g)
    k, v = (torch.randn(1, kv_heads, 50, head_dim, generator=g)[:, :, :37] for _ in range(2))
    mask = torch.randn(1, heads, 1, 37, generator=g)
    mask[0, 0, 0, 5:] = float("-inf")  # one head sees 5 keys
    q, k, v = (t.to(dtype) for t in (q, k, v))
    got = _run(q, k, v, mask, head_dim ** -0.5, level, threads)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, scale=head_dim ** -0.5,
                                          enable_gqa=True)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), want, rtol=tolerance, atol=tolerance)


def test_a_fully_masked_row_gives_zeros():
    q, k, v = torch.randn(1, 2, 1, 16), torch.randn(1, 1, 5, 16), torch.randn(1, 1, 5, 16)
    mask = torch.full((1, 1, 1, 5), float("-inf"))
    assert torch.equal(_run(q, k, v, mask, 0.25, None), torch.zeros(1, 2, 1, 16))


@pytest.mark.parametrize("make, problem", [
    (lambda: (torch.randn(1, 3, 1, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), None), "multiple of the key/value heads"),
    (lambda: (torch.randn(1, 2, 1, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 5, 8), None), "must have k's shape"),
    (lambda: (torch.randn(1, 2, 1, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8).bfloat16(), None), "dtype"),
    (lambda: (torch.randn(1, 2, 1, 8), torch.randn(1, 1, 0, 8), torch.randn(1, 1, 0, 8), None), "no keys"),
    (lambda: (torch.randn(1, 2, 1, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), torch.zeros(1, 1, 1, 5)), "does not broadcast"),
    (lambda: (torch.randn(1, 2, 1, 16)[..., ::2], torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), None), "contiguous last dim"),
])
def test_refuses_what_it_cannot_read(make, problem):
    q, k, v, mask = make()
    out = torch.empty(q.shape, dtype=q.dtype)
    with pytest.raises(ValueError, match=problem):
        native_lib.raw.decode_attention(q, k, v, out, mask, 1.0, None, 1)
