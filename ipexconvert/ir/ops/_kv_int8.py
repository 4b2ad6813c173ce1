"""A decoder's KV cache stored as int8 rows (`--kv-cache int8`): each cached position of each head is one row of
head_dim + 4 int8 values, the head's head_dim codes, then the row's float32 scale as its 4 bytes (little-endian,
as every x86 CPU and GPU here stores it). One tensor per cache, as a float cache is, so the signature, the growing
buffers and the static caches hold it unchanged; a row is a quarter of a float32 row's bytes (plus 4).

The codes we promise, for a row x of head_dim values computed in float32:
    scale = max(|x|) / 127                       (float32)
    code  = clamp(round_half_even(x / scale), -127, 127)     (IEEE division; 0 for every value when scale is 0)
and a row with a NaN or an infinity stores scale NaN and codes 0, so reading it gives NaN, as the float cache would
have carried. Reading a row gives code * scale in float32 (ir/ops/sdpa.py widens it so). Per row, symmetric, no
zero point: each key or value vector of a token is one row, and its largest element keeps full 8-bit precision.
"""
from __future__ import annotations

import torch

INT8_CACHE = "int8"
SCALE_BYTES = 4  # the float32 scale at the end of each row


def row_width(cache_dtype: str, head_dim):
    """The last dim of a cache of `cache_dtype` holding heads of head_dim values (an int, or a dim name as-is)."""
    if cache_dtype != INT8_CACHE:
        return head_dim
    return head_dim + SCALE_BYTES if isinstance(head_dim, int) else head_dim


def head_dim_of(cache_dtype: str, width):
    """The head size a cache's last dim holds (the inverse of row_width)."""
    if cache_dtype != INT8_CACHE:
        return width
    return width - SCALE_BYTES if isinstance(width, int) else width


def quantize_rows(x: torch.Tensor) -> torch.Tensor:
    """[..., d] float -> [..., d + 4] int8: the codes, then each row's float32 scale as bytes (the module's rule)."""
    x = x.float()
    amax = x.abs().amax(dim=-1, keepdim=True) if x.shape[-1] else x.new_zeros((*x.shape[:-1], 1))
    finite = torch.isfinite(amax)
    scale = torch.where(finite, amax / 127.0, torch.full_like(amax, float("nan")))
    usable = finite & (scale > 0)
    codes = torch.where(usable, torch.round(x / torch.where(usable, scale, torch.ones_like(scale))),
                        torch.zeros_like(x)).clamp_(-127, 127).to(torch.int8)
    return torch.cat([codes, scale.contiguous().view(torch.int8)], dim=-1)


def dequantize_rows(rows: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[..., d + 4] int8 rows -> [..., d] code * scale in float32, then `dtype` (a copy)."""
    d = rows.shape[-1] - SCALE_BYTES
    scale = rows[..., d:].contiguous().view(torch.float32)  # [..., 1]
    return (rows[..., :d].float() * scale).to(dtype)


def to_cache(new: torch.Tensor, cache_dtype: torch.dtype) -> torch.Tensor:
    """New positions as a cache of `cache_dtype` stores them: int8 rows, or rounded to a float dtype."""
    return quantize_rows(new) if cache_dtype == torch.int8 else new.to(cache_dtype)


def from_cache(cache: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A cache read as `dtype` values: int8 rows dequantized, a float cache widened (exactly) or as it is."""
    return dequantize_rows(cache, dtype) if cache.dtype == torch.int8 else cache.to(dtype)
