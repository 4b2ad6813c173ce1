"""int8_amx_gemm (int8_gemm's arithmetic on AMX tiles): the same bits as int8_gemm for every output dtype and
epilogue (residual, relu, erf GELU, column factors), exact int32 sums at the extreme codes, row tails (one A tile,
a zero-padded partial pair, two row blocks), k past one chunk of steps, strided rows, any thread count; its weight
layout and its argument checks."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.backends.cpu.kernels._int8_gemm import pack_int8_amx_weight, pack_int8_weight

AMX = native.available() and "amx" in native.supported_levels() and native.kernel_level("int8_amx_gemm") == "amx"
AVX2 = native.available() and native.kernel_level("int8_gemm", "avx2") == "avx2"
pytestmark = pytest.mark.skipif(not (AMX and AVX2), reason="needs the native build on a CPU with AMX")

# m, n, k: 1 row, 16 (one A tile), 17 (two), a pair and a tail, k = 640 (a chunk of 8 steps of 64 and 2 more),
# 300 rows (two blocks of 256)
SHAPES = [(1, 32, 64), (16, 64, 128), (17, 32, 64), (45, 96, 192), (40, 64, 640), (300, 64, 128)]
OUT = {"f32": (torch.float32, 1.0, 0), "bf16": (torch.bfloat16, 1.0, 0), "u8": (torch.uint8, 0.07, 9),
       "s8": (torch.int8, 0.05, -3)}


def operands(m, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 256, (m, k), dtype=torch.uint8, generator=g),
            torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g),
            torch.rand(n, generator=g) * 1e-3 + 1e-5, torch.randn(n, generator=g))


def both(a, zp, w, scales, bias, out_kind, threads=2, **epilogue):
    """(int8_gemm's result, int8_amx_gemm's) for the same call."""
    dtype, out_scale, out_zp = OUT[out_kind]
    m, n = a.shape[0], w.shape[0]
    want, got = torch.empty(m, n, dtype=dtype), torch.empty(m, n, dtype=dtype)
    relu = epilogue.pop("relu", False)
    native.raw.int8_gemm(a, zp, pack_int8_weight(w), n, scales, bias, relu, want, out_scale, out_zp, "avx2", threads,
                         **epilogue)
    packed, sums = pack_int8_amx_weight(w)
    native.raw.int8_amx_gemm(a, zp, packed, sums, n, scales, bias, relu, got, out_scale, out_zp, None, threads,
                             **epilogue)
    return want, got


def test_layout_puts_each_quad_where_the_b_tile_reads_it():
    w = torch.arange(64 * 128, dtype=torch.int32).remainder(251).sub(125).to(torch.int8).reshape(64, 128)
    packed, sums = pack_int8_amx_weight(w)
    assert packed.shape == (2, 2, 16, 32, 4) and packed.dtype == torch.int8
    for n, k in [(0, 0), (5, 7), (33, 70), (63, 127)]:  # block (n / 32, k / 64), quad row, output in block, k % 4
        assert packed[n // 32, k // 64, (k % 64) // 4, n % 32, k % 4] == w[n, k]
    assert torch.equal(sums, w.int().sum(dim=1))


@pytest.mark.parametrize("out_kind", list(OUT))
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_same_bits_as_int8_gemm(m, n, k, out_kind):
    a, w, scales, bias = operands(m, n, k, seed=m + n + k)
    want, got = both(a, 77, w, scales, bias, out_kind)
    assert torch.equal(got, want)


@pytest.mark.parametrize("epilogue", ["relu", "gelu", "multiplier", "residual_f32", "residual_u8_relu"])
@pytest.mark.parametrize("out_kind", ["f32", "bf16", "u8"])
def test_same_bits_with_each_epilogue(epilogue, out_kind):
    m, n, k = 45, 64, 192
    a, w, scales, bias = operands(m, n, k, seed=3)
    g = torch.Generator().manual_seed(4)
    extra = {"relu": {"relu": True}, "gelu": {"gelu": True},
             "multiplier": {"gelu": True, "multiplier": torch.rand(n, generator=g) * 4},
             "residual_f32": {"residual": torch.randn(m, n, generator=g) * 3},
             "residual_u8_relu": {"residual": torch.randint(0, 256, (m, n), dtype=torch.uint8, generator=g),
                                  "residual_scale": 0.02, "residual_zero_point": 100, "relu": True}}[epilogue]
    want, got = both(a, 31, w, scales, bias, out_kind, **extra)
    assert torch.equal(got, want)


def test_extreme_codes_sum_exactly():
    """255 x -128 over k = 4096 and the zero point 0: sums of -133693440, which int16 pair sums would saturate."""
    m, n, k = 32, 32, 4096
    a = torch.full((m, k), 255, dtype=torch.uint8)
    w = torch.full((n, k), -128, dtype=torch.int8)
    scales, bias = torch.ones(n), torch.zeros(n)
    _, got = both(a, 0, w, scales, None, "f32")
    assert (got == -255.0 * 128 * k).all()
    _, got = both(a, 255, w, scales, bias, "f32")  # (a - zp) is 0 everywhere
    assert (got == 0).all()


def test_strided_rows_and_any_thread_count():
    m, n, k = 70, 96, 256
    a_wide, w, scales, bias = operands(m, n, k + 64, seed=9)
    a = a_wide[:, 32:32 + k]  # rows 320 bytes apart
    assert a.stride(0) == k + 64
    want, got = both(a, 12, w[:, :k].contiguous(), scales, bias, "bf16", threads=2)
    _, alone = both(a, 12, w[:, :k].contiguous(), scales, bias, "bf16", threads=1)
    assert torch.equal(got, want) and torch.equal(alone, want)


def test_refuses_what_it_cannot_run():
    a, w, scales, bias = operands(4, 32, 64)
    packed, sums = pack_int8_amx_weight(w)
    out = torch.empty(4, 32)
    call = native.raw.int8_amx_gemm
    with pytest.raises(ValueError, match="multiples of 32 and 64"):
        call(a[:, :48].contiguous(), 0, packed, sums, 32, scales, bias, False, out, 1.0, 0, None, 1)
    with pytest.raises(ValueError, match="packed int8 weight"):
        call(a, 0, packed[:, :, :8].contiguous(), sums, 32, scales, bias, False, out, 1.0, 0, None, 1)
    with pytest.raises(ValueError, match="w_sums"):
        call(a, 0, packed, sums[:16].contiguous(), 32, scales, bias, False, out, 1.0, 0, None, 1)
    with pytest.raises(ValueError, match="amx level"):
        call(a, 0, packed, sums, 32, scales, bias, False, out, 1.0, 0, "avx512_bf16", 1)
    with pytest.raises(ValueError, match="out"):
        call(a, 0, packed, sums, 32, scales, bias, False, torch.empty(3, 32), 1.0, 0, None, 1)
    with pytest.raises(ValueError, match="2-D int8"):
        pack_int8_amx_weight(w[:16])
