"""The bf16_amx_gemm kernel (a bf16 linear layer on AMX tiles on a weight packed by linear.pack_amx_weight) against
float64 matmul: row tails (the zero-padded last pair, one A tile for 16 rows or fewer), rows over one 256-row block,
strided rows, bias, relu and the erf GELU fused, NaN kept, the same bits at any thread count; its argument checks."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.backends.cpu.kernels.linear import pack_amx_weight

AMX = native.available() and "amx" in native.supported_levels() and native.kernel_level("bf16_amx_gemm") == "amx"
pytestmark = pytest.mark.skipif(not AMX, reason="needs the native build on a CPU with AMX")

# m, n, k: 1 row, 16 (one A tile) and 17 (two), a whole pair, a pair and a tail, BERT-base's 128 x 768 -> 3072, two
# row blocks (256 + 44), k = 32 (one tile step), and k = 320 (a whole chunk of 8 steps and a part, pairs' sums parked
# between them, with a partial pair)
SHAPES = [(1, 32, 64), (16, 64, 96), (17, 64, 96), (32, 96, 32), (45, 64, 160), (128, 3072, 768), (300, 96, 64),
          (70, 128, 320)]


def reference(x, w, bias, unary):
    out = x.double().reshape(-1, x.shape[-1]) @ w.double().T
    if bias is not None:
        out = out + bias.double()
    return {"none": out, "relu": out.relu(), "gelu": torch.nn.functional.gelu(out)}[unary]


def test_packed_layout_puts_each_b_tile_where_the_kernel_reads_it():
    w = torch.arange(64 * 96, dtype=torch.float32).reshape(64, 96).bfloat16()
    packed = pack_amx_weight(w)
    assert packed.shape == (2, 3, 16, 32, 2)
    for n, k in [(0, 0), (5, 7), (33, 40), (63, 95)]:  # block (n / 32, k / 32), pair row, channel in block, k parity
        assert packed[n // 32, k // 32, (k % 32) // 2, n % 32, k % 2] == w[n, k]


@pytest.mark.parametrize("unary", ["none", "relu", "gelu"])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_matches_float64_within_one_bf16_rounding(m, n, k, unary):
    torch.manual_seed(m * n + k)
    x, w, bias = torch.randn(m, k).bfloat16(), (torch.randn(n, k) / k ** 0.5).bfloat16(), torch.randn(n)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    native.raw.bf16_amx_gemm(x, pack_amx_weight(w), bias, out, None, 2, unary)
    want = reference(x, w, bias, unary)
    # float32 sums, then one rounding to bf16: within half a bf16 unit (2^-8 relative) plus the sums' own error
    assert ((out.double() - want).abs() <= want.abs() * 2.0 ** -8 + 1e-4 * (k ** 0.5)).all()
    alone = torch.empty(m, n, dtype=torch.bfloat16)
    native.raw.bf16_amx_gemm(x, pack_amx_weight(w), bias, alone, None, 1, unary)
    assert torch.equal(out, alone)  # each output's sum has one order whatever the threads


def test_strided_rows_no_bias_and_leading_dims():
    torch.manual_seed(3)
    wide, w = torch.randn(40, 200).bfloat16(), torch.randn(64, 128).bfloat16()
    x = wide[:, 8:136]  # rows 200 apart
    out = torch.empty(40, 64, dtype=torch.bfloat16)
    native.raw.bf16_amx_gemm(x, pack_amx_weight(w), None, out, None, 2)
    want = reference(x, w, None, "none")
    assert ((out.double() - want).abs() <= want.abs() * 2.0 ** -8 + 1e-3).all()
    x3, out3 = x.contiguous().reshape(2, 20, 128), torch.empty(2, 20, 64, dtype=torch.bfloat16)
    native.raw.bf16_amx_gemm(x3, pack_amx_weight(w), None, out3, None, 2)
    assert torch.equal(out3.reshape(40, 64), out)


def test_nan_in_a_row_stays_in_that_row():
    torch.manual_seed(4)
    x, w = torch.randn(20, 64).bfloat16(), torch.randn(32, 64).bfloat16()
    x[3, 10] = float("nan")
    for unary in ("none", "relu", "gelu"):
        out = torch.empty(20, 32, dtype=torch.bfloat16)
        native.raw.bf16_amx_gemm(x, pack_amx_weight(w), None, out, None, 2, unary)
        assert out[3].isnan().all() and not out[torch.arange(20) != 3].isnan().any()


def test_refuses_what_it_cannot_run():
    x, w = torch.randn(4, 64).bfloat16(), pack_amx_weight(torch.randn(32, 64).bfloat16())
    out = torch.empty(4, 32, dtype=torch.bfloat16)
    cases = [
        (dict(w=torch.randn(32, 64).bfloat16()), "packed bfloat16 weight"),
        (dict(w=w.float()), "packed bfloat16 weight"),
        (dict(x=torch.randn(4, 96).bfloat16()), "k = 64"),
        (dict(x=x.float()), "x must be a bfloat16"),
        (dict(out=torch.empty(4, 64, dtype=torch.bfloat16)), "must hold 4 rows of 32"),
        (dict(bias=torch.randn(31)), "must have 32 elements"),
        (dict(unary="tanh"), "unary must be"),
        (dict(max_isa="avx512_bf16"), "needs the amx level"),
    ]
    for change, message in cases:
        args = dict(x=x, w=w, bias=None, out=out, max_isa=None, threads=2, unary="none") | change
        with pytest.raises(ValueError, match=message):
            native.raw.bf16_amx_gemm(args["x"], args["w"], args["bias"], args["out"], args["max_isa"], args["threads"],
                                     args["unary"])
    with pytest.raises(ValueError, match="must not share memory"):
        both = torch.randn(4, 64).bfloat16()
        native.raw.bf16_amx_gemm(both, pack_amx_weight(torch.randn(64, 64).bfloat16()), None, both, None, 2)
