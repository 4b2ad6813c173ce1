"""What the bf16 and fp32 attention kernel tests share: the padding mask they use, the error
measure, and the check that the quantized output equals the quantize op on the float output."""
from __future__ import annotations

import torch

import native_ops as native
from ipexconvert.ir import get_op


def reference(q, k, v, mask, scale=None, dtype=torch.float32):
    """The sdpa op's reference, computed in `dtype` (fp32 for the bf16 kernel, float64 for fp32)."""
    sdpa = get_op("sdpa")
    attrs = sdpa.parse_attrs({"scale": scale})
    return sdpa.reference([t.to(dtype) for t in (q, k, v)] + [None if mask is None else mask.to(dtype)], attrs, {})


def normalised_error(got, want) -> float:
    return ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()


def padding_mask(batch, kv_len, dtype, fill=float("-inf")):
    mask = torch.zeros(batch, 1, 1, kv_len)
    mask[-1, ..., kv_len // 2 + 1:] = fill  # the last sequence pads its second half (keeps >= 1 key)
    return mask.to(dtype)


def assert_quantized_output_matches(shape, dtype, code_dtype, zero_point, multipliers, level):
    """The codes equal the quantize op's (per tensor, or with SmoothQuant multipliers along the
    hidden axis h * head_dim + d) applied to the kernel's float output flattened to [batch,
    q_len, hidden], and both ends of the code range are reached."""
    batch, heads, q_len, kv_len, head_dim = shape
    torch.manual_seed(sum(shape) + 1)
    q = (torch.randn(batch, heads, q_len, head_dim) * 2).to(dtype)
    k, v = (torch.randn(batch, heads, kv_len, head_dim).to(dtype) for _ in range(2))
    mask = padding_mask(batch, kv_len, torch.float32)
    scale = 0.01  # outputs up to ~3 saturate some codes at both ends
    multiplier = torch.rand(heads * head_dim) * 2 / scale if multipliers else None
    quantize = get_op("quantize")
    attrs = quantize.parse_attrs({"scale": scale, "zero_point": zero_point, "dtype": str(code_dtype).split(".")[1]})
    flat = native.attention(q, k, v, mask, max_isa=level).transpose(1, 2).reshape(batch, q_len, heads * head_dim)
    want = quantize.reference([flat] + ([multiplier] if multipliers else []), attrs, {})
    got = native.attention(q, k, v, mask, quantize_to=(scale, zero_point, code_dtype), quantize_multipliers=multiplier,
                           max_isa=level)
    assert got.dtype == code_dtype and got.shape == (batch, heads, q_len, head_dim)
    assert torch.equal(got.transpose(1, 2).reshape(batch, q_len, heads * head_dim), want)
    lo, hi = (0, 255) if code_dtype == torch.uint8 else (-128, 127)
    assert (want == lo).any() and (want == hi).any()  # the clamp was exercised


def assert_strided_views_threads_and_scale(dtype, level, threshold, reference_dtype):
    """q/k/v as slices of one packed projection give the bits of contiguous copies; thread
    counts do not change the result; an explicit scale is applied."""
    torch.manual_seed(0)
    batch, seq, heads, head_dim = 2, 77, 6, 64
    qkv = torch.randn(batch, seq, 3 * heads * head_dim).to(dtype)
    q, k, v = (t.reshape(batch, seq, heads, head_dim).permute(0, 2, 1, 3) for t in qkv.split(heads * head_dim, -1))
    mask = padding_mask(batch, seq, dtype)
    strided = native.attention(q, k, v, mask, threads=2, max_isa=level)
    dense = native.attention(q.contiguous(), k.contiguous(), v.contiguous(), mask, threads=1, max_isa=level)
    assert torch.equal(strided, dense)
    assert strided.transpose(1, 2).is_contiguous()  # the [batch, seq, heads, head_dim] buffer
    scaled = native.attention(q, k, v, mask, scale=0.05, max_isa=level)
    assert normalised_error(scaled, reference(q, k, v, mask, scale=0.05, dtype=reference_dtype)) <= threshold


def assert_rows_the_mask_removes_are_zero(dtype, level):
    """A query row whose every key the mask removes (-inf everywhere) comes out as 0, or as the zero point's code when
    quantized, as the sdpa op promises; the kernel stores it so itself. Shared masks (one row per sequence: a whole
    sequence removed), per-query masks (single rows removed, the block's other rows kept), fp32 and bf16 masks. A
    row the mask keeps but whose scores are NaN stays NaN: the mask decides, not the arithmetic."""
    torch.manual_seed(11)
    batch, heads, q_len, kv_len, head_dim = 2, 3, 37, 45, 64
    q = torch.randn(batch, heads, q_len, head_dim).to(dtype)
    k, v = (torch.randn(batch, heads, kv_len, head_dim).to(dtype) for _ in range(2))
    shared = torch.zeros(batch, 1, 1, kv_len)
    shared[1] = float("-inf")  # sequence 1 keeps no key
    shared[0, ..., 20:] = float("-inf")
    per_query = torch.randn(batch, heads, q_len, kv_len)
    per_query[0, 1, 5] = float("-inf")  # single rows, inside and at the end of a block of queries
    per_query[1, 2, 16:18] = float("-inf")
    per_query[1, 0, 36] = float("-inf")
    per_query[0, 2, :, 30:] = float("-inf")  # keys every row of a head masks: the rest of the row decides
    per_query[0, 2, 7, :30] = float("-inf")
    for mask in (shared, shared.bfloat16(), per_query, per_query.bfloat16()):
        removed = (mask == float("-inf")).all(-1, keepdim=True).expand(batch, heads, q_len, 1)
        assert removed.any() and not removed.all()
        got = native.attention(q, k, v, mask, threads=2, max_isa=level)
        assert torch.equal(got.masked_select(removed), torch.zeros_like(got.masked_select(removed)))
        kept = ~removed.expand_as(got)
        assert torch.isfinite(got[kept]).all()
        want = reference(q, k, v, mask, dtype=torch.float64 if dtype == torch.float32 else torch.float32)
        assert normalised_error(got[kept], want[kept]) <= (1e-5 if dtype == torch.float32 else 1e-2)
        codes = native.attention(q, k, v, mask, quantize_to=(0.05, 117, torch.uint8), max_isa=level)
        assert torch.equal(codes.masked_select(removed), torch.full_like(codes.masked_select(removed), 117))
    q_nan = q.clone()
    q_nan[0, 0, 3] = float("nan")
    got = native.attention(q_nan, k, v, shared, max_isa=level)
    assert got[0, 0, 3].isnan().all() and torch.isfinite(got[0, 0, :3]).all()
