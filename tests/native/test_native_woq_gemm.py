"""woq_gemm: float32 activations times int8 / int4 weight-only quantized weights, at every ISA level this
CPU runs (capped per call), against dequantize-then-matmul in float64.

Tolerance: float32 accumulation error. Each output is a sum of K terms; the decode path sums
x * q per group and subtracts zero * sum(x) (so its terms are x * q * scale and x * zero * scale), the
prefill path sums x * ((q - zero) * scale). So |got - exact| <= 1e-5 * sum_k |x_k| (|q_nk| + |zero_ng|) scale_ng
(about 80 float32 ulps of the summed magnitudes) for every element; measured worst is ~1e-6 of that bound.

Covered: bits 8 and 4 (symmetric, asymmetric), groups 2 .. K (per channel), the decode (m <= 4) and prefill
paths (forced and chosen by m), odd m / n / k around the 16-channel blocks, the 12- and 6-row tiles and the
256-k panel chunks, bias or none, thread counts (bit-identical), strided rows in and out, empty rows, and
the argument errors. Path 3 (int8-quantized activations, vpmaddubsw; opt-in, never chosen by the runtime): exact
on the rounded rows, within x's rounding of the float result, thread-independent, its errors. Path 4 (int8 weights
in k-quads times int8-quantized activations, every row count; AVX2 sign trick / AVX-512 VNNI): the same, plus the
extreme codes (-127 and 127 against x of both signs), rows of NaN or infinity giving NaN rows. Its amx build's tile prefill
(more than 32 rows): bit-identical to the VNNI build; the same for path 5. Path 5 (4-bit
weights in k-octets times int8-quantized activations, every row count; AVX-512 VNNI): the same, bit-equal to path 3."""
from __future__ import annotations

from typing import Optional

import pytest
import torch

import native_ops as native
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.ops.woq_linear import SYMMETRIC_INT4_ZERO, dequantize
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext, resolve_kernel

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")
LEVELS = native.supported_levels() if native.available() else []

# (m, n, k, group_size): tails of the 16-channel blocks and of the decode / prefill row tiles, panel chunks
SHAPES = [(1, 1, 2, 2), (1, 16, 32, 32), (2, 33, 64, 32), (3, 50, 256, 64), (4, 7, 128, 128), (5, 40, 512, 128),
          (13, 17, 6, 2), (25, 100, 384, 128), (70, 300, 640, 64), (1, 96, 1024, 1024)]
FORMATS = [pytest.param(8, False, id="int8"), pytest.param(4, False, id="int4-sym"), pytest.param(4, True, id="int4-asym")]


def operands(m: int, n: int, k: int, group_size: int, bits: int, asym: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    if bits == 8:
        codes = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    else:
        codes = torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.uint8)
    scales = torch.rand(n, k // group_size, generator=g) * 0.1 + 0.01
    zero_points = torch.randint(0, 16, (n, k // group_size), generator=g, dtype=torch.uint8) if asym else None
    bias = torch.randn(n, generator=g)
    return x, codes, scales, zero_points, bias


def expected(x, codes, scales, zero_points, bias, bits, group_size):
    """(exact result in float64, the error bound of a float32 sum of these terms)."""
    w = dequantize(codes, scales, zero_points, bits, group_size).double()
    exact = x.double() @ w.T + (0 if bias is None else bias.double())
    q = codes.double() if bits == 8 else torch.stack([codes & 15, codes >> 4], -1).reshape(codes.shape[0], -1).double()
    zero = (zero_points.double() if zero_points is not None else
            torch.full_like(scales, SYMMETRIC_INT4_ZERO if bits == 4 else 0, dtype=torch.float64))
    magnitudes = (q.abs() + zero.repeat_interleave(group_size, 1)) * scales.double().repeat_interleave(group_size, 1)
    return exact, 1e-5 * (x.double().abs() @ magnitudes.T) + 1e-30


def check(got, x, codes, scales, zero_points, bias, bits, group_size, what):
    exact, bound = expected(x, codes, scales, zero_points, bias, bits, group_size)
    assert got.dtype == torch.float32 and got.shape == exact.shape, what
    worst = ((got.double() - exact).abs() / bound).max().item() if got.numel() else 0.0
    assert worst <= 1.0, f"{what}: error {worst:.3g} x the float32 accumulation bound"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bits, asym", FORMATS)
@pytest.mark.parametrize("path", [0, 1, 2], ids=["by-rows", "decode", "prefill"])
def test_matches_dequantize_then_matmul(level, bits, asym, path):
    for i, (m, n, k, gs) in enumerate(SHAPES):
        x, codes, scales, zero_points, bias = operands(m, n, k, gs, bits, asym, seed=i)
        got = native.woq_gemm(x, codes, scales, zero_points, bias if i % 2 == 0 else None, bits=bits, group_size=gs,
                              path=path, max_isa=level, threads=2)
        check(got, x, codes, scales, zero_points, bias if i % 2 == 0 else None, bits, gs,
              f"{(m, n, k, gs)} at {level}, path {path}")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bits, asym", FORMATS)
def test_rows_pick_the_path(level, bits, asym):
    """Path 0 is the decode path up to 4 rows and the prefill path above, bit for bit."""
    for m in (1, 4, 5, 9):
        x, codes, scales, zero_points, bias = operands(m, 40, 256, 64, bits, asym, seed=m)
        run = lambda path: native.woq_gemm(x, codes, scales, zero_points, bias, bits=bits, group_size=64, path=path,
                                           max_isa=level, threads=1)
        assert torch.equal(run(0), run(1 if m <= 4 else 2)), f"m={m}"



@pytest.mark.parametrize("path, bits, needs", [(1, 8, None), (1, 4, None), (3, 4, "avx2"), (4, 8, "avx2"),
                                               (5, 4, "avx512_vnni")], ids=["float-int8", "float-int4", "gemv-i8",
                                                                             "w8a8", "w4a8"])
def test_a_long_weight_stream_splits_into_bounded_ranges(path, bits, needs):
    """A decode GEMV over more than 256 KiB of weights runs in ranges of at most that many bytes (common.h,
    stream_chunk): 96 blocks of 16 channels x 4096 inputs give 24-48 ranges over the threads instead of 4 a thread.
    Every channel is still one task's: the same bits for any thread count, within the bound of the reference."""
    if needs is not None and needs not in LEVELS:
        pytest.skip(f"needs {needs} (this CPU lacks it)")
    x, codes, scales, zero_points, bias = operands(1, 1530, 4096, 128, bits, bits == 4, seed=7)
    for level in {needs, LEVELS[-1]} - {None}:  # the lowest level with the path, and this CPU's best
        run = lambda t: native.woq_gemm(x, codes, scales, zero_points, bias, bits=bits, group_size=128, path=path,
                                        threads=t, max_isa=level)
        got = run(2)
        assert torch.equal(got, run(1)) and torch.equal(got, run(3)), level
        rows = x if path in (1, 2) else _quantized_rows(x)
        check(got, rows, codes, scales, zero_points, bias, bits, 128, f"path {path} at {level}")

@pytest.mark.parametrize("path", [1, 2], ids=["decode", "prefill"])
@pytest.mark.parametrize("threads", [2, 3])
def test_thread_counts_agree_bit_for_bit(path, threads):
    """Each output element is summed in the same order however the channels and rows are split."""
    for m, n in ((3, 100), (40, 35), (200, 16)):
        x, codes, scales, zero_points, bias = operands(m, n, 512, 128, 4, True, seed=n)
        run = lambda t: native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=128, path=path,
                                        threads=t)
        assert torch.equal(run(threads), run(1))


@pytest.mark.parametrize("m", [2, 30])
def test_strided_rows_read_and_write_in_place(m):
    x, codes, scales, zero_points, bias = operands(m, 24, 64, 32, 4, False, seed=7)
    packed, qparams, has_zero = native.pack_woq_weight(codes, scales, zero_points, 4, 32)
    wide = torch.zeros(m, 100)
    wide[:, 10:74] = x
    out = torch.full((m, 30), -1.0)
    native.raw.woq_gemm(wide[:, 10:74], packed, 24, 4, 32, qparams, has_zero, bias, out[:, 3:27], None, 2, 0)
    want = native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=32)
    assert torch.equal(out[:, 3:27], want)
    assert (out[:, :3] == -1).all() and (out[:, 27:] == -1).all()


RESIDUAL_CASES = [  # (path, bits, rows, k): every path, decode and prefill rows, a prefill k of several panel chunks
    (0, 8, 6, 64), (1, 8, 2, 64), (2, 8, 40, 640), (4, 8, 6, 64), (4, 8, 40, 640), (3, 4, 4, 64), (5, 4, 40, 640)]


@pytest.mark.parametrize("path, bits, rows, k", RESIDUAL_CASES)
def test_n_dimensional_rows_and_a_residual_added_after_the_bias(path, bits, rows, k):
    level = native.selected_level()  # the calls below run at it (IPEXCONVERT_MAX_ISA caps it)
    if path in (3, 4) and level == "generic" or path == 5 and level not in VNNI_UP:
        pytest.skip(f"path {path} needs a level above {level}")
    x, codes, scales, _, bias = operands(rows, 24, k, 32, bits, False, seed=8)
    packed, qparams, has_zero = native.pack_woq_weight(codes, scales, None, bits, 32, integer_layout=path in (4, 5))
    residual = torch.randn(2, rows // 2, 24)
    out = torch.empty(2, rows // 2, 24)
    native.raw.woq_gemm(x.view(2, rows // 2, k), packed, 24, bits, 32, qparams, has_zero, bias, out, None, 2, path,
                        residual)
    alone = torch.empty(rows, 24)
    native.raw.woq_gemm(x, packed, 24, bits, 32, qparams, has_zero, bias, alone, None, 2, path)
    # The same sum as torch's add after it: the kernels add the residual after their last store of a row.
    assert torch.equal(out, (alone + residual.view(rows, 24)).view(2, rows // 2, 24))


def test_a_residual_sharing_memory_with_out_is_refused():
    x, codes, scales, _, bias = operands(4, 16, 64, 32, 8, False, seed=9)
    packed, qparams, has_zero = native.pack_woq_weight(codes, scales, None, 8, 32)
    out = torch.zeros(5, 16)
    for residual in (out[:4], out[1:]):  # the same rows, and rows shifted by one
        with pytest.raises(ValueError, match="residual must not share memory with out"):
            native.raw.woq_gemm(x, packed, 16, 8, 32, qparams, has_zero, bias, out[:4], None, 1, 0, residual)


@pytest.mark.parametrize("bits, path", [(8, 0), (4, 1), (8, 2), (4, 3), (8, 4), (4, 5)])
def test_no_rows(bits, path):
    """No rows: nothing computed, on every path. (The integer paths divided by the row count: a SIGFPE, found by the
    fuzzer in a decoder artifact whose batch range was edited to admit 0.)"""
    needs = {3: LEVELS[1:], 4: LEVELS[1:], 5: [lv for lv in LEVELS if lv in ("avx512_vnni", "avx512_bf16", "amx")]}
    levels = needs.get(path, LEVELS)
    if not levels:
        pytest.skip(f"path {path} has no build this CPU runs")
    x, codes, scales, _, bias = operands(0, 20, 64, 32, bits, False)
    for level in levels:
        got = native.woq_gemm(x, codes, scales, None, bias, bits=bits, group_size=32, path=path, max_isa=level)
        assert got.shape == (0, 20)


def test_extreme_codes_and_zero_scales():
    """Codes at both ends of their ranges, a channel of zero scales (a padded or all-zero channel): exact zeros."""
    k, n = 64, 20
    x = torch.randn(6, k)
    for bits, codes in ((8, torch.tensor([-127, 127], dtype=torch.int8).repeat(n, k // 2)),
                        (4, torch.tensor([0x0F, 0xF0], dtype=torch.uint8).repeat(n, k // 4))):
        scales = torch.rand(n, 2) + 0.5
        scales[3] = 0.0
        for path in (1, 2):
            got = native.woq_gemm(x, codes, scales, bits=bits, group_size=32, path=path)
            check(got, x, codes, scales, None, None, bits, 32, f"bits {bits} path {path}")
            assert (got[:, 3] == 0).all()


def test_packing_layout():
    codes = torch.arange(20 * 6, dtype=torch.int64).remainder(256).to(torch.uint8).view(20, 6)  # bits 4: k = 12
    scales = torch.rand(20, 3)
    packed, qparams, has_zero = native.pack_woq_weight(codes, scales, None, 4, 4)
    assert packed.shape == (2, 6, 16) and packed.dtype == torch.uint8 and has_zero
    assert packed[1, 2, 3].item() == codes[19, 2].item() and packed[1, 2, 4:].abs().sum() == 0  # channels padded
    assert qparams.shape == (2, 3, 1, 16)  # symmetric: the scales alone, the kernel takes the zero point 8
    assert qparams[1, 2, 0, 3].item() == scales[19, 2].item()
    assert qparams[1, :, :, 4:].abs().sum() == 0
    zero_points = torch.randint(0, 16, (20, 3), dtype=torch.uint8)
    _, qparams, _ = native.pack_woq_weight(codes, scales, zero_points, 4, 4)
    assert qparams.shape == (2, 3, 2, 16)
    assert qparams[1, 2, 0, 3].item() == scales[19, 2].item() and qparams[1, 2, 1, 3].item() == zero_points[19, 2]


@pytest.mark.parametrize("path, bits, rows, k", RESIDUAL_CASES)
def test_scales_alone_equal_explicit_symmetric_zero_points(path, bits, rows, k):
    """Symmetric codes pack their scales alone (one plane); every path then reads the symmetric zero point (8 for
    4-bit codes, 0 for int8) and gives the same bits as the two-plane layout holding those zero points."""
    level = native.selected_level()
    if path in (3, 4) and level == "generic" or path == 5 and level not in VNNI_UP:
        pytest.skip(f"path {path} needs a level above {level}")
    x, codes, scales, _, bias = operands(rows, 40, k, 32, bits, False, seed=12)
    packed, one_plane, has_zero = native.pack_woq_weight(codes, scales, None, bits, 32, integer_layout=path in (4, 5))
    assert one_plane.shape[2] == 1
    symmetric = torch.full(scales.shape, SYMMETRIC_INT4_ZERO if bits == 4 else 0, dtype=torch.uint8)
    _, two_planes, _ = native.pack_woq_weight(codes, scales, symmetric, bits, 32, integer_layout=path in (4, 5))
    assert two_planes.shape[2] == 2
    outs = []
    for qparams in (one_plane, two_planes):
        out = torch.empty(rows, 40)
        native.raw.woq_gemm(x, packed, 40, bits, 32, qparams, has_zero, bias, out, None, 2, path)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    rows_seen = _quantized_rows(x) if path in (3, 4, 5) else x  # the integer paths round x to int8 per row first
    check(outs[0], rows_seen, codes, scales, None, bias, bits, 32, f"path {path}")


def test_kernel_has_per_level_builds():
    assert native.kernel_levels("woq_gemm") == ["generic", "avx2", "avx512"]
    assert native.kernel_levels("woq_gemv_i8") == ["avx2"]
    assert native.kernel_levels("woq_gemm_w8a8") in (["avx2", "avx512_vnni", "amx"], ["avx2", "avx512_vnni"])  # -mamx-*
    assert native.kernel_levels("woq_gemm_w4a8") in (["avx512_vnni", "amx"], ["avx512_vnni"])


# ---- path 3: decode on int8-quantized activations (4-bit weights, AVX2 and up) -------------------------

AVX2_UP = [level for level in LEVELS if level != "generic"]


def _quantized_rows(x: torch.Tensor) -> torch.Tensor:
    """x as path 3 sees it: per row xs = max|x| / 127 (float32), codes round_half_even(x / xs), times xs."""
    xs = x.abs().amax(dim=1, keepdim=True) / 127
    xs = torch.where(xs > 0, xs, torch.ones_like(xs))
    return torch.round(x / xs) * xs


@pytest.mark.parametrize("level", AVX2_UP)
@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
def test_int8_activation_path_is_exact_on_the_quantized_rows(level, asym):
    """Path 3 equals the float computation on x rounded to int8 per row (to float32 accumulation error), and
    differs from the float paths by x's rounding: at most max|x| / 254 per element times sum |W|."""
    for i, (m, n, k, gs) in enumerate(SHAPES + [(6, 17, 36, 6), (2, 100, 2048, 2048)]):
        x, codes, scales, zero_points, bias = operands(m, n, k, gs, 4, asym, seed=i)
        x[0, : min(k, 3)] = 0.0  # zero codes; and a row of zeros below
        if m > 1:
            x[1] = 0.0
        got = native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=gs, path=3, max_isa=level)
        check(got, _quantized_rows(x), codes, scales, zero_points, bias, 4, gs, f"{(m, n, k, gs)} at {level}")
        w = dequantize(codes, scales, zero_points, 4, gs).double()
        exact = x.double() @ w.T + bias.double()
        rounding = (x.abs().amax(1, keepdim=True).double() / 254) @ w.abs().sum(1, keepdim=True).T
        assert ((got.double() - exact).abs() <= rounding * (1 + 1e-4) + 1e-5).all()


def test_int8_activation_path_is_numerically_different_and_thread_independent():
    if native.selected_level() == "generic":  # these calls run at the selected (capped) level
        pytest.skip("needs AVX2 (this CPU lacks it, or IPEXCONVERT_MAX_ISA caps below it)")
    x, codes, scales, zero_points, bias = operands(3, 64, 512, 128, 4, True, seed=4)
    run = lambda path, threads: native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=128, path=path,
                                                threads=threads)
    assert not torch.equal(run(3, 1), run(1, 1))
    assert torch.equal(run(3, 2), run(3, 1)) and torch.equal(run(3, 3), run(3, 1))
    clean = run(3, 1)
    x[1, 7] = float("-inf")  # a row with an infinity gives a NaN row, as the op's rounding does; the others stay
    got = run(3, 2)
    assert got[1].isnan().all() and torch.equal(got[[0, 2]], clean[[0, 2]])


def test_int8_activation_path_errors():
    args = _args(path=3, bits=8, w=torch.zeros(1, 64, 16, dtype=torch.int8))
    with pytest.raises(ValueError, match="path 3 .* takes 4-bit weights"):
        native.raw.woq_gemm(*args.values())
    with pytest.raises(ValueError, match="needs avx2"):
        native.raw.woq_gemm(*_args(path=3, max_isa="generic").values())


# ---- path 4: int8 weights in k-quads on int8-quantized activations (AVX2 and up) --------------------------

W8A8_SHAPES = [(1, 1, 4, 4), (1, 16, 32, 32), (2, 33, 64, 32), (3, 50, 256, 64), (4, 7, 128, 128), (5, 40, 512, 128),
               (13, 17, 8, 4), (25, 100, 384, 384), (70, 300, 640, 64), (1, 96, 1024, 1024), (9, 24, 4864, 4864),
               (40, 20, 12, 4)]  # 12: a vector of 8 and a tail in the row rounding


@pytest.mark.parametrize("level", AVX2_UP)
def test_w8a8_path_is_exact_on_the_quantized_rows(level):
    """Path 4 equals the float computation on x rounded to int8 per row (its integer sums are exact: the only
    rounding is the float32 scaling per group), including the extreme codes against x of both signs."""
    for i, (m, n, k, gs) in enumerate(W8A8_SHAPES):
        x, codes, scales, _, bias = operands(m, n, k, gs, 8, False, seed=i)
        codes[0, : min(k, 8)] = torch.tensor([-127, 127, -127, 127, 127, -127, 0, -127], dtype=torch.int8)[: min(k, 8)]
        x[0, : min(k, 4)] = torch.tensor([-3.0, 2.0, 0.0, -1.0])[: min(k, 4)]
        if m > 1:
            x[1] = 0.0  # a row of zeros: scale 1, codes 0
        got = native.woq_gemm(x, codes, scales, None, bias, bits=8, group_size=gs, path=4, max_isa=level)
        check(got, _quantized_rows(x), codes, scales, None, bias, 8, gs, f"{(m, n, k, gs)} at {level}")


@pytest.mark.skipif("amx" not in LEVELS, reason="needs AMX (this CPU lacks it, or IPEXCONVERT_MAX_ISA caps below it)")
@pytest.mark.parametrize("m, n, k, gs", [(33, 16, 64, 64), (70, 300, 640, 64), (100, 48, 896, 896), (40, 33, 4864, 128),
                                         (64, 32, 192, 192)])
def test_w8a8_amx_prefill_is_the_vnni_path_bit_for_bit(m, n, k, gs):
    """The amx build runs more than 32 rows on AMX tiles (groups of whole 64-k steps; rows in tiles of 16, a
    partial last panel, an odd block count), with the VNNI path's integer sums and float steps: the same bits."""
    x, codes, scales, _, bias = operands(m, n, k, gs, 8, False, seed=m)
    codes[0, :4] = torch.tensor([-127, 127, -127, 127], dtype=torch.int8)
    run = lambda level, threads=2: native.woq_gemm(x, codes, scales, None, bias, bits=8, group_size=gs, path=4,
                                                   threads=threads, max_isa=level)
    got = run("amx")
    assert torch.equal(got, run("avx512_vnni"))
    assert torch.equal(run("amx", 1), got) and torch.equal(run("amx", 3), got)
    check(got, _quantized_rows(x), codes, scales, None, bias, 8, gs, f"{(m, n, k, gs)} at amx")


def test_w8a8_path_thread_independent_and_nan_rows():
    if native.selected_level() == "generic":  # these calls run at the selected (capped) level
        pytest.skip("needs AVX2 (this CPU lacks it, or IPEXCONVERT_MAX_ISA caps below it)")
    x, codes, scales, _, bias = operands(6, 64, 512, 128, 8, False, seed=4)
    run = lambda threads, level=None: native.woq_gemm(x, codes, scales, None, bias, bits=8, group_size=128, path=4,
                                                      threads=threads, max_isa=level)
    assert torch.equal(run(2), run(1)) and torch.equal(run(3), run(1))
    assert torch.equal(run(1, "avx2"), run(1))  # exact integer sums: every ISA level gives the same bits
    x[2, 5], x[4, 0] = float("nan"), float("inf")
    got = run(2)
    assert got[2].isnan().all() and got[4].isnan().all()
    assert torch.isfinite(got[[0, 1, 3, 5]]).all()
    assert torch.equal(got[[0, 1, 3, 5]], run(1)[[0, 1, 3, 5]])
    # Enough rows that the rounding of x is split over the threads too: a NaN row in the second half stays NaN.
    x, codes, scales, _, bias = operands(96, 48, 1024, 128, 8, False, seed=5)  # run() reads these
    x[77, 1000] = float("nan")
    got, alone = run(2), run(1)
    assert got[77].isnan().all() and torch.isfinite(got[:77]).all() and torch.isfinite(got[78:]).all()
    assert torch.equal(got.nan_to_num(), alone.nan_to_num())


# ---- path 5: 4-bit weights in k-octets on int8-quantized activations (AVX-512 VNNI) ----------------------

VNNI_UP = [level for level in LEVELS if level in ("avx512_vnni", "avx512_bf16", "amx")]
W4A8_SHAPES = [(1, 1, 8, 8), (1, 16, 32, 32), (2, 33, 64, 32), (3, 50, 256, 64), (4, 7, 128, 128), (5, 40, 512, 128),
               (13, 17, 16, 8), (25, 100, 384, 384), (70, 300, 640, 64), (1, 96, 1024, 1024), (9, 24, 4864, 128),
               (3, 18, 36872, 36872),  # a group of 4609 octets: the high-nibble sums folded once on the way
               (37, 20, 256, 64)]  # prefill: a panel of 32 rows, then 4 + 1


@pytest.mark.parametrize("level", VNNI_UP)
@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
def test_w4a8_path_is_exact_on_the_quantized_rows(level, asym):
    """Path 5 equals the float computation on x rounded to int8 per row, and gives the same bits as path 3
    (the same integer sums and the same float32 scaling) where both run."""
    for i, (m, n, k, gs) in enumerate(W4A8_SHAPES):
        x, codes, scales, zero_points, bias = operands(m, n, k, gs, 4, asym, seed=i)
        codes[0, : min(k // 2, 4)] = torch.tensor([0x0F, 0xF0, 0x00, 0xFF], dtype=torch.uint8)[: min(k // 2, 4)]
        if m > 1:
            x[1] = 0.0
        got = native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=gs, path=5, max_isa=level)
        check(got, _quantized_rows(x), codes, scales, zero_points, bias, 4, gs, f"{(m, n, k, gs)} at {level}")
        if m <= 4:
            path3 = native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=gs, path=3, max_isa=level)
            assert torch.equal(got, path3), f"{(m, n, k, gs)} at {level}"


@pytest.mark.skipif("amx" not in LEVELS, reason="needs AMX (this CPU lacks it, or IPEXCONVERT_MAX_ISA caps below it)")
@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
@pytest.mark.parametrize("m, n, k, gs", [(33, 16, 64, 64), (70, 300, 640, 64), (100, 48, 896, 896), (40, 33, 4864, 128)])
def test_w4a8_amx_prefill_is_the_vnni_path_bit_for_bit(m, n, k, gs, asym):
    """Path 5's amx build runs more than 32 rows on AMX tiles (the codes unpacked into int8 B tiles, x offset by
    128) with the VNNI path's integer sums and float steps: the same bits, a NaN row still a NaN row."""
    x, codes, scales, zero_points, bias = operands(m, n, k, gs, 4, asym, seed=m)
    codes[0, :4] = torch.tensor([0x0F, 0xF0, 0x00, 0xFF], dtype=torch.uint8)
    x[m - 1, 3] = float("nan")
    run = lambda level, threads=2: native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=gs,
                                                   path=5, threads=threads, max_isa=level)
    got = run("amx")
    assert torch.equal(got.nan_to_num(), run("avx512_vnni").nan_to_num())
    assert got[m - 1].isnan().all() and torch.isfinite(got[: m - 1]).all()
    assert torch.equal(run("amx", 1).nan_to_num(), got.nan_to_num())
    check(got[: m - 1], _quantized_rows(x[: m - 1]), codes, scales, zero_points, bias, 4, gs, f"{(m, n, k, gs)} at amx")


def test_w4a8_path_thread_independent_nan_rows_and_errors():
    if native.selected_level() not in VNNI_UP:
        pytest.skip("needs AVX-512 VNNI (this CPU lacks it, or IPEXCONVERT_MAX_ISA caps below it)")
    x, codes, scales, zero_points, bias = operands(6, 64, 512, 128, 4, True, seed=4)
    run = lambda threads: native.woq_gemm(x, codes, scales, zero_points, bias, bits=4, group_size=128, path=5,
                                          threads=threads, max_isa=VNNI_UP[-1])  # also under IPEXCONVERT_MAX_ISA
    assert torch.equal(run(2), run(1)) and torch.equal(run(3), run(1))
    clean = run(1)
    x[3, 9] = float("nan")
    got = run(2)
    assert got[3].isnan().all() and torch.equal(got[[0, 1, 2, 4, 5]], clean[[0, 1, 2, 4, 5]])
    x, codes, scales, zero_points, bias = operands(70, 50, 512, 128, 4, True, seed=5)  # prefill: panels of rows
    assert torch.equal(run(2), run(1)) and torch.equal(run(3), run(1))
    with pytest.raises(ValueError, match="needs avx512_vnni"):
        native.raw.woq_gemm(*_args(path=5, max_isa="avx2").values())
    with pytest.raises(ValueError, match="path 5 takes 4-bit weights packed in k-octets"):
        native.raw.woq_gemm(*_args(path=5, x=torch.randn(4, 60), group_size=60, w=torch.zeros(1, 30, 16, dtype=torch.uint8),
                                   qparams=torch.zeros(1, 1, 2, 16)).values())


def _args(**change):
    x, codes, scales, zero_points, bias = operands(4, 16, 64, 32, 4, True)
    packed, qparams, has_zero = native.pack_woq_weight(codes, scales, zero_points, 4, 32)
    args = dict(x=x, w=packed, n=16, bits=4, group_size=32, qparams=qparams, has_zero=has_zero, bias=bias,
                out=torch.empty(4, 16), max_isa=None, threads=1, path=0, residual=None)
    args.update(change)
    return args


@pytest.mark.parametrize("change, message", [
    (dict(x=torch.randn(4, 64, dtype=torch.float64)), "x must be a float32 tensor of 2 or more dims"),
    (dict(x=torch.randn(64)), "x must be a float32 tensor of 2 or more dims"),
    (dict(x=torch.randn(4, 2, 64)), "out \\[4, 16\\] must hold 8 rows of 16"),
    (dict(x=torch.randn(2, 4, 64).transpose(0, 1)), "must be contiguous \\(or 2-D"),
    (dict(x=torch.randn(64, 4).T), "needs contiguous rows"),
    (dict(bits=3), "bits = 3"),
    (dict(group_size=48), "does not divide k = 64"),
    (dict(group_size=0), "does not divide"),
    (dict(x=torch.randn(4, 63), group_size=63), "must be even"),
    (dict(group_size=1), "must be even"),
    (dict(n=0), "n = 0"),
    (dict(n=17), "packed uint8 weight"),
    (dict(w=torch.zeros(1, 32, 16, dtype=torch.int8)), "packed uint8 weight"),
    (dict(w=torch.zeros(1, 31, 16, dtype=torch.uint8)), "packed uint8 weight"),
    (dict(bits=8), "packed int8 weight"),
    (dict(qparams=torch.zeros(1, 2, 2, 15)), "qparams must be"),
    (dict(qparams=torch.zeros(1, 2, 2, 16, dtype=torch.float64)), "qparams must be"),
    (dict(bias=torch.zeros(15)), "bias"),
    (dict(out=torch.empty(4, 15)), "out \\[4, 15\\] must hold 4 rows of 16"),
    (dict(out=torch.empty(4, 16, dtype=torch.bfloat16)), "out must be a float32 tensor"),
    (dict(residual=torch.zeros(4, 15)), "residual must be float32 with out's 4 rows of 16"),
    (dict(residual=torch.zeros(4, 16, dtype=torch.bfloat16)), "residual must be float32"),
    (dict(out=torch.empty(16, 4).T), "out .* needs contiguous rows"),
    (dict(path=6), "path = 6"),
    (dict(path=4), "path 4 takes 8-bit weights"),
    (dict(max_isa="avx9"), "not an ISA level"),
])
def test_bad_arguments_are_clear_errors(change, message):
    args = _args(**change)
    with pytest.raises(ValueError, match=message):
        native.raw.woq_gemm(*args.values())


# ---- the registered kernel -----------------------------------------------------------------------------


def _context(level: str, x: torch.Tensor, constants: list[Optional[torch.Tensor]], attrs: dict) -> NodeContext:
    op = get_op("woq_linear")
    parsed = op.parse_attrs(attrs)
    specs = tuple(None if t is None else TensorSpec.of(t) for t in [x, *constants])
    return NodeContext(op="woq_linear", attrs=parsed, constants=(None, *constants), input_specs=specs,
                       output_specs=tuple(op.infer(specs, parsed)), device="cpu", isa=level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_registered_kernel_runs_native_at_every_level(level, dtype):
    x, codes, scales, zero_points, bias = operands(6, 40, 128, 64, 4, True, seed=3)
    x = x.view(2, 3, 128).to(dtype)
    attrs = {"bits": 4, "group_size": 64, "post_ops": [{"kind": "silu"}]}
    kernel = resolve_kernel(_context(level, x, [codes, scales, zero_points, bias], attrs))
    assert kernel.name == f"native:woq_linear@{native.kernel_level('woq_gemm', level)}"
    got = kernel.fn([x, None, None, None, None], {})
    want = get_op("woq_linear").reference([x, codes, scales, zero_points, bias], get_op("woq_linear").parse_attrs(attrs), {})
    assert got.dtype == dtype and got.shape == (2, 3, 40)
    torch.testing.assert_close(got, want, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-2 if dtype == torch.bfloat16 else 1e-5)


@pytest.mark.parametrize("level", AVX2_UP)
def test_int8_codes_of_minus_128_on_int8_activations_take_the_rounded_float_paths(level):
    """An int8 weight holding a code of -128 (outside the quantizer's range: a hand-made or edited artifact) leaves
    the integer path (its AVX2 sign trick would overflow); its decode rows then go through the float paths on rows
    rounded to int8, never the 4-bit decode path 3 (that refused the call with a ValueError, found by the fuzzer)."""
    x, codes, scales, _, bias = operands(5, 24, 64, 32, 8, False, seed=6)
    codes[3, 10] = -128
    attrs = {"bits": 8, "group_size": 32, "activations": "int8"}
    kernel = resolve_kernel(_context(level, x, [codes, scales, None, bias], attrs))
    want = get_op("woq_linear").reference([x, codes, scales, None, bias], get_op("woq_linear").parse_attrs(attrs), {})
    for rows in (x[:1], x[:4], x):  # decode rows and prefill rows
        got = kernel.fn([rows, None, None, None, None], {})
        torch.testing.assert_close(got, want[:rows.shape[0]], rtol=0.05, atol=0.05 * want.abs().max().item())
