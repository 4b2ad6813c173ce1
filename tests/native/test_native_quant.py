"""INT8 kernels (quantize, dequantize, requantize, quantize_last_axis) and embedding at every ISA
level this machine can run. quantize is checked bit for bit against the rounding we promise
(docs/native.md, "INT8 conventions"), written out below in float64: per tensor
round_half_even(fl32(x * fl32(1 / scale) + zp)) with one rounding (an FMA), per channel the
product rounded to float32 first; torch 2.13's quantize_per_tensor / quantize_per_channel do the
same, other torch versions round some halves differently (torch 2.11), so torch is not the
oracle. dequantize and requantize to
float32 tolerance (they come out exact in practice), quantize_last_axis bit-exact with the fp32
torch expression, embedding equal to F.embedding.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import native_ops as native

pytestmark = [
    pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built"),
    # torch's quantized tensors (our reference) warn that they are deprecated.
    pytest.mark.filterwarnings("ignore:.*quantize.*deprecated:UserWarning"),
]
LEVELS = native.supported_levels() if native.available() else []
FDTYPES = [torch.float32, torch.bfloat16]
QDTYPES = {torch.int8: torch.qint8, torch.uint8: torch.quint8}
COLS = (1, 7, 15, 16, 17, 63, 768, 1000)  # tails around 16 lanes, odd sizes
# (rows, cols, threads): small ones on 1 thread; 67 x 768 splits across 2 threads mid-row.
SHAPES = [(3, c, 1) for c in COLS] + [(67, 768, 2)]


def _code_range(qdtype):
    return (-128, 127) if qdtype == torch.int8 else (0, 255)


def promised_per_tensor(x, scale, zp, qdtype):
    """round_half_even(x * (1/scale) + zp) with one rounding to float32 (FMA), clamped."""
    inv = (1.0 / torch.tensor(scale, dtype=torch.float32)).double()
    v = (x.double() * inv + zp).float()
    return torch.clamp(torch.round(v), *_code_range(qdtype)).to(qdtype)


def promised_per_channel(x, scales, zps, qdtype):
    """Per row of axis 0: the product rounded to float32, then + zp rounded, then round_half_even."""
    inv = (1.0 / scales.float()).view(-1, *[1] * (x.dim() - 1))
    v = (x.float() * inv) + zps.float().view(-1, *[1] * (x.dim() - 1))
    return torch.clamp(torch.round(v), *_code_range(qdtype)).to(qdtype)


def _values(rows, cols, dtype):
    """Random values across and beyond the int8 range, plus exact halves (x * 4 = k + 0.5 at
    scale 0.25) so round-half-to-even is exercised."""
    x = torch.randn(rows, cols) * 40
    x.view(-1)[::3] = (torch.arange(0, rows * cols, 3) % 200 - 100).float() * 0.125 + 0.125
    return x.to(dtype)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qdtype", list(QDTYPES), ids=["int8", "uint8"])
@pytest.mark.parametrize("dtype", FDTYPES, ids=["fp32", "bf16"])
def test_quantize_per_tensor_bit_exact(dtype, qdtype, level):
    torch.manual_seed(0)
    zp = 3 if qdtype == torch.int8 else 128
    for rows, cols, threads in SHAPES:
        x = _values(rows, cols, dtype)
        for scale in (0.25, 0.0371):
            got = native.quantize_per_tensor(x, scale, zp, qdtype, max_isa=level, threads=threads)
            want = promised_per_tensor(x.float(), scale, zp, qdtype)
            assert got.dtype == qdtype and got.shape == x.shape
            assert torch.equal(got, want), f"[{rows}x{cols}] scale {scale} at {level}: {(got != want).sum()} differ"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qdtype", list(QDTYPES), ids=["int8", "uint8"])
@pytest.mark.parametrize("dtype", FDTYPES, ids=["fp32", "bf16"])
def test_quantize_per_channel_bit_exact(dtype, qdtype, level):
    torch.manual_seed(1)
    for rows, cols, threads in SHAPES + [(5, 3 * 7, 1)]:
        x = _values(rows, cols, dtype)
        if (rows, cols) == (5, 21):
            x = x.reshape(5, 3, 7)  # axis 0 of a 3-D tensor: the rest is one channel's row
        scales = torch.rand(rows, dtype=torch.float64) * 0.5 + 0.01
        scales[0] = 0.25
        lo, hi = (-128, 127) if qdtype == torch.int8 else (0, 255)
        zps = torch.randint(lo, hi + 1, (rows,))
        got = native.quantize_per_channel(x, scales, zps, qdtype, max_isa=level, threads=threads)
        want = promised_per_channel(x.float(), scales, zps, qdtype)
        assert torch.equal(got, want), f"[{rows}x{cols}] at {level}: {(got != want).sum()} differ"


@pytest.mark.parametrize("level", LEVELS)
def test_quantize_rounds_as_promised_where_fma_matters(level):
    """x * (1/scale) + zero_point for this x lies within half an ulp of 33.5: rounded once (FMA,
    per tensor) it is 33, with the product rounded first (per channel) 34. The value sits at
    every position of a 40-element row (vector body and tail)."""
    v, scale, zp = 1.1315498352050781, 0.0371, 3
    x = torch.full((2, 40), v)
    got = native.quantize_per_tensor(x, scale, zp, max_isa=level, threads=1)
    assert torch.equal(got, promised_per_tensor(x, scale, zp, torch.int8))
    assert (got == 33).all()
    s, z = torch.full((2,), scale, dtype=torch.float64), torch.full((2,), zp)
    got = native.quantize_per_channel(x, s, z, max_isa=level, threads=1)
    assert torch.equal(got, promised_per_channel(x, s, z, torch.int8))
    assert (got == 34).all()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qdtype", list(QDTYPES), ids=["int8", "uint8"])
@pytest.mark.parametrize("dtype", FDTYPES, ids=["fp32", "bf16"])
def test_dequantize(dtype, qdtype, level):
    torch.manual_seed(2)
    lo, hi = (-128, 127) if qdtype == torch.int8 else (0, 255)
    for rows, cols, threads in SHAPES:
        q = torch.randint(lo, hi + 1, (rows, cols), dtype=qdtype)
        zp = 5 if qdtype == torch.int8 else 130
        # per tensor, against torch.dequantize of the same codes
        qt = torch._make_per_tensor_quantized_tensor(q, 0.0371, zp)
        want = torch.dequantize(qt).to(dtype)
        got = native.dequantize_per_tensor(q, 0.0371, zp, dtype, max_isa=level, threads=threads)
        assert got.dtype == dtype and got.shape == q.shape
        torch.testing.assert_close(got, want, msg=f"per tensor [{rows}x{cols}] at {level}")
        # per channel
        scales = torch.rand(rows, dtype=torch.float64) * 0.5 + 0.01
        zps = torch.randint(lo, hi + 1, (rows,))
        qc = torch._make_per_channel_quantized_tensor(q, scales, zps, 0)
        want = torch.dequantize(qc).to(dtype)
        got = native.dequantize_per_channel(q, scales, zps, dtype, max_isa=level, threads=threads)
        torch.testing.assert_close(got, want, msg=f"per channel [{rows}x{cols}] at {level}")


def _requantize_reference(acc, mult, zp, qdtype, bias=None):
    v = acc if bias is None else acc + bias
    lo, hi = (-128, 127) if qdtype == torch.int8 else (0, 255)
    return torch.clamp(torch.round(v.float() * mult.float()) + zp, lo, hi).to(qdtype)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qdtype", list(QDTYPES), ids=["int8", "uint8"])
def test_requantize(qdtype, level):
    torch.manual_seed(3)
    zp = -7 if qdtype == torch.int8 else 120
    for rows, cols, threads in SHAPES:
        acc = torch.randint(-40000, 40000, (rows, cols), dtype=torch.int32)
        acc.view(-1)[::5] = (torch.arange(0, rows * cols, 5, dtype=torch.int32) % 500 - 250) * 2 + 1  # halves at 0.5
        mult = torch.rand(cols) * 0.01 + 1e-4
        mult[::2] = 0.5
        bias = torch.randint(-1000, 1000, (cols,), dtype=torch.int32)
        for b in (None, bias):
            got = native.requantize(acc, mult, zp, qdtype, bias=b, max_isa=level, threads=threads)
            want = _requantize_reference(acc, mult, zp, qdtype, b)
            assert torch.equal(got, want), f"[{rows}x{cols}] bias={b is not None} at {level}"
        # one multiplier for every channel
        got = native.requantize(acc, 0.003, zp, qdtype, max_isa=level, threads=threads)
        assert torch.equal(got, _requantize_reference(acc, torch.tensor(0.003), zp, qdtype))


def _quantize_last_axis_reference(x, inv, zp, qdtype):
    lo, hi = (-128, 127) if qdtype == torch.int8 else (0, 255)
    return torch.clamp(torch.round(x.float() * inv) + zp, lo, hi).to(qdtype)


def _last_axis_inputs(lead, cols, dtype):
    """x [*lead, cols] across and beyond the quantized range, with exact halves: even channels
    get power-of-two multipliers and values (k + 0.5) / inv, so x * inv is exactly k + 0.5
    (representable in bf16 too for |k| < 128). Odd channels get arbitrary multipliers."""
    inv = torch.rand(cols) * 3 + 0.05
    inv[::2] = torch.tensor([0.25, 0.5, 2.0, 4.0]).repeat(cols)[: (cols + 1) // 2]
    x = torch.randn(*lead, cols) * 60 / inv
    k = torch.randint(-140, 140, (*lead, (cols + 1) // 2)).float() + 0.5
    x[..., ::2] = k / inv[::2]
    return x.to(dtype), inv


LAST_AXIS_COLS = (1, 3, 17, 64, 385, 768)
# Leading shapes (rows = their product, 1 .. 130); the 130-row ones run on 2 threads (split mid-way).
LAST_AXIS_LEADS = [((1,), 1), ((2,), 1), ((7,), 1), ((3, 5), 1), ((130,), 2), ((2, 65), 2)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qdtype", list(QDTYPES), ids=["int8", "uint8"])
@pytest.mark.parametrize("dtype", FDTYPES, ids=["fp32", "bf16"])
def test_quantize_last_axis_bit_exact(dtype, qdtype, level):
    """Per-channel multipliers along the last axis (SmoothQuant activations): bit-identical to
    clamp(round(x.float() * inv) + zp) at every level, odd zero points (a half then rounds
    differently than round(x * inv + zp) would), and values past both ends of the range."""
    torch.manual_seed(5)
    for cols in LAST_AXIS_COLS:
        for lead, threads in LAST_AXIS_LEADS:
            x, inv = _last_axis_inputs(lead, cols, dtype)
            for zp in ((3, -128, 127) if qdtype == torch.int8 else (127, 0, 255)):
                got = native.quantize_last_axis(x, inv, zp, qdtype, max_isa=level, threads=threads)
                want = _quantize_last_axis_reference(x, inv, zp, qdtype)
                assert got.dtype == qdtype and got.shape == x.shape
                assert torch.equal(got, want), (f"{list(x.shape)} zp={zp} at {level}, {threads} thread(s): "
                                                f"{(got != want).sum()} differ")


@pytest.mark.parametrize("level", LEVELS)
def test_quantize_last_axis_strided_inputs(level):
    """Non-contiguous x (channels_last 4-D, a transpose) is quantized as its logical values."""
    torch.manual_seed(6)
    for dtype in FDTYPES:
        x4 = (torch.randn(2, 5, 3, 17) * 50).to(dtype).to(memory_format=torch.channels_last)
        xt = (torch.randn(33, 9) * 50).to(dtype).t()
        for x in (x4, xt):
            assert not x.is_contiguous()
            inv = torch.rand(x.shape[-1]) + 0.1
            got = native.quantize_last_axis(x, inv, 0, torch.int8, max_isa=level, threads=1)
            assert torch.equal(got, _quantize_last_axis_reference(x, inv, 0, torch.int8))


@pytest.mark.parametrize("level", LEVELS)
def test_quantize_last_axis_multiplies_does_not_divide(level):
    """The kernel multiplies by inv_scales (a float32 product, as the reference): for these x,
    x * (1/s) lands on or past a half where x / s does not (7.5 vs 7.4999995 -> 8 vs 7;
    8.500001 vs 8.5 -> 9 vs 8). Each value fills a 40-element row (vector body and tail)."""
    s = torch.tensor(0.0371)
    inv = torch.full((40,), 1.0) / s
    x = torch.tensor([0.27824997901916504, 0.3153499960899353]).view(2, 1).expand(2, 40)
    got = native.quantize_last_axis(x, inv, 0, torch.int8, max_isa=level, threads=1)
    assert torch.equal(got, _quantize_last_axis_reference(x, inv, 0, torch.int8))
    assert (got[0] == 8).all() and (got[1] == 9).all()
    assert torch.equal(torch.round(x / s)[:, 0], torch.tensor([7.0, 8.0]))  # what dividing would give


def test_quantize_last_axis_errors():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        native.quantize_last_axis(x.double(), torch.ones(8), 0)
    with pytest.raises(ValueError, match="torch.int8 or torch.uint8"):
        native.quantize_last_axis(x, torch.ones(8), 0, torch.int32)
    with pytest.raises(ValueError, match=r"inv_scales \[4\] must have 8 elements \(one per channel: the last dim"):
        native.quantize_last_axis(x, torch.ones(4), 0)
    with pytest.raises(ValueError, match="must have 8 elements"):
        native.quantize_last_axis(x, torch.ones(2, 4), 0)
    with pytest.raises(ValueError, match="positive and finite"):
        native.quantize_last_axis(x, torch.tensor([1.0] * 7 + [float("inf")]), 0)
    with pytest.raises(ValueError, match="positive and finite"):
        native.quantize_last_axis(x, torch.zeros(8), 0)
    with pytest.raises(ValueError, match="outside the torch.uint8 range"):
        native.quantize_last_axis(x, torch.ones(8), -1)
    with pytest.raises(ValueError, match="outside the torch.int8 range"):
        native.quantize_last_axis(x, torch.ones(8), 128, torch.int8)
    with pytest.raises(ValueError, match="must be integers"):
        native.quantize_last_axis(x, torch.ones(8), 1.5)
    with pytest.raises(ValueError, match="at least one dim"):
        native.quantize_last_axis(torch.tensor(1.0), torch.ones(1), 0)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        native.quantize_last_axis([1.0, 2.0], torch.ones(2), 0)
    # The binding's own checks (what the wrapper's validation stands in front of).
    out = torch.empty(4, 8, dtype=torch.uint8)
    with pytest.raises(ValueError, match="inv_scales has dtype float64; it must be float32"):
        native.raw.quantize_last_axis(x, torch.ones(8, dtype=torch.float64), 0, out, None, 1)
    with pytest.raises(ValueError, match="zero_point 300 is outside the quantized range"):
        native.raw.quantize_last_axis(x, torch.ones(8), 300, out, None, 1)
    with pytest.raises(ValueError, match="not contiguous"):
        native.raw.quantize_last_axis(x.t(), torch.ones(4), 0, out.t(), None, 1)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("idtype", [torch.int64, torch.int32], ids=["i64", "i32"])
@pytest.mark.parametrize("dtype", FDTYPES, ids=["fp32", "bf16"])
def test_embedding(dtype, idtype, level):
    torch.manual_seed(4)
    for vocab, dim, idx_shape, threads in [(1, 1, (1,), 1), (50, 7, (3, 5), 1), (97, 17, (13,), 1),
                                            (1000, 768, (2, 67), 2), (30, 16, (0,), 1)]:
        w = torch.randn(vocab, dim).to(dtype)
        idx = torch.randint(0, vocab, idx_shape, dtype=idtype)
        got = native.embedding(w, idx, max_isa=level, threads=threads)
        assert torch.equal(got, F.embedding(idx, w)), f"[{vocab}x{dim}] {idx_shape} at {level}"


@pytest.mark.parametrize("level", LEVELS)
def test_embedding_out_of_range_index_is_an_error(level):
    w = torch.randn(10, 4)
    for bad in (10, -1, 2**40):
        idx = torch.tensor([[0, 3], [bad, 1]])
        with pytest.raises(IndexError, match=rf"index {bad} \(at flat position 2\) is out of range for a table of 10"):
            native.embedding(w, idx, max_isa=level)
    with pytest.raises(IndexError, match="index 10"):
        native.embedding(w, torch.tensor([10], dtype=torch.int32), max_isa=level)


@pytest.mark.parametrize("kernel", ["quantize", "dequantize", "requantize", "quantize_last_axis", "embedding"])
def test_int8_kernels_have_per_level_builds(kernel):
    built = native.kernel_levels(kernel)
    assert built[0] == "generic" and "avx2" in built and "avx512" in built
    for level in LEVELS:
        below = [lv for lv in built if native.levels().index(lv) <= native.levels().index(level)]
        assert native.kernel_level(kernel, level) == below[-1]


def test_int8_errors():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        native.quantize_per_tensor(x.double(), 0.1, 0)
    with pytest.raises(ValueError, match="torch.int8 or torch.uint8"):
        native.quantize_per_tensor(x, 0.1, 0, torch.int16)
    with pytest.raises(ValueError, match="positive and finite"):
        native.quantize_per_tensor(x, 0.0, 0)
    with pytest.raises(ValueError, match="outside the torch.int8 range"):
        native.quantize_per_tensor(x, 0.1, 200)
    with pytest.raises(ValueError, match="outside the torch.uint8 range"):
        native.quantize_per_tensor(x, 0.1, -1, torch.uint8)
    with pytest.raises(ValueError, match="one per channel along axis 0 \\(4\\)"):
        native.quantize_per_channel(x, torch.ones(8), torch.zeros(8))
    with pytest.raises(ValueError, match="axis 0 only"):
        native.quantize_per_channel(x, torch.ones(8), torch.zeros(8), axis=1)
    with pytest.raises(ValueError, match="not contiguous"):
        native.quantize_per_tensor(x.t(), 0.1, 0)
    with pytest.raises(ValueError, match="int8 or uint8"):
        native.dequantize_per_tensor(x, 0.1, 0)
    with pytest.raises(ValueError, match="float32 or torch.bfloat16"):
        native.dequantize_per_tensor(torch.zeros(3, dtype=torch.int8), 0.1, 0, torch.float16)
    with pytest.raises(ValueError, match="int32 accumulator"):
        native.requantize(torch.zeros(2, 3, dtype=torch.int64), 0.1)
    with pytest.raises(ValueError, match="1 or 3 elements"):
        native.requantize(torch.zeros(2, 3, dtype=torch.int32), torch.ones(2))
    with pytest.raises(ValueError, match="bias has dtype torch.float32"):
        native.requantize(torch.zeros(2, 3, dtype=torch.int32), 0.1, bias=torch.zeros(3))
    with pytest.raises(ValueError, match="bias .* must have 3 elements"):
        native.requantize(torch.zeros(2, 3, dtype=torch.int32), 0.1, bias=torch.zeros(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="int64 or int32"):
        native.embedding(torch.randn(5, 3), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="must be 2-D"):
        native.embedding(torch.randn(5), torch.tensor([1]))
    with pytest.raises(ValueError, match="weight has dtype float64; native kernels take float32 or bfloat16"):
        native.embedding(torch.randn(5, 3, dtype=torch.float64), torch.tensor([1]))


def test_empty_tensors():
    assert native.quantize_per_tensor(torch.zeros(0, 5), 0.1, 0).shape == (0, 5)
    assert native.quantize_per_channel(torch.zeros(0, 5), torch.ones(0), torch.zeros(0)).shape == (0, 5)
    assert native.dequantize_per_tensor(torch.zeros(3, 0, dtype=torch.uint8), 0.1, 0).shape == (3, 0)
    assert native.requantize(torch.zeros(0, 4, dtype=torch.int32), 0.1).shape == (0, 4)
    assert native.quantize_last_axis(torch.zeros(0, 5), torch.ones(5), 0).shape == (0, 5)
    assert native.quantize_last_axis(torch.zeros(3, 0, dtype=torch.bfloat16), torch.ones(0), 0).shape == (3, 0)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qdtype", list(QDTYPES), ids=["int8", "uint8"])
@pytest.mark.parametrize("dtype", FDTYPES, ids=["fp32", "bf16"])
def test_layer_norm_quantized_output_is_the_quantized_norm(dtype, qdtype, level):
    """fold_norm_quantize's kernel: the extra output equals quantizing the norm the kernel returns,
    bit for bit, and the norm itself is unchanged by asking for it."""
    torch.manual_seed(2)
    zp = -5 if qdtype == torch.int8 else 131
    for rows, cols, threads in SHAPES:
        x, r = (torch.randn(rows, cols) * 2).to(dtype), torch.randn(rows, cols).to(dtype)
        w, b = torch.randn(cols), torch.randn(cols)
        plain = native.layer_norm(x, w, b, 1e-5, residual=r, max_isa=level, threads=threads)
        for scale in (0.02, 0.0371):
            y, total, q = native.layer_norm(x, w, b, 1e-5, residual=r, return_sum=True, quantize_to=(scale, zp, qdtype),
                                            max_isa=level, threads=threads)
            assert torch.equal(y, plain) and torch.equal(total, (x + r))
            want = native.quantize_per_tensor(y, scale, zp, qdtype, max_isa=level, threads=threads)
            assert q.dtype == qdtype and torch.equal(q, want), f"[{rows}x{cols}] at {level}: {(q != want).sum()} differ"
            if cols >= 63:
                assert len(q.unique()) > 20  # codes spread over the range: the comparison means something
        multipliers = torch.rand(cols) * 40 + 5  # SmoothQuant's 1 / (smooth[c] * scale)
        y, q = native.layer_norm(x, w, b, 1e-5, residual=r, quantize_to=(1.0, zp, qdtype),
                                 quantize_multipliers=multipliers, max_isa=level, threads=threads)
        want = native.quantize_last_axis(y, multipliers, zp, qdtype, max_isa=level, threads=threads)
        assert torch.equal(y, plain) and torch.equal(q, want), f"[{rows}x{cols}] multipliers at {level}"


def test_layer_norm_quantized_output_errors():
    x = torch.randn(4, 8)
    with pytest.raises(Exception, match="quantized values are int8 or uint8"):
        native.layer_norm(x, quantize_to=(0.1, 0, torch.int32))
    with pytest.raises(Exception, match="outside q_out's range"):
        native.layer_norm(x, quantize_to=(0.1, 300, torch.uint8))
    with pytest.raises(Exception, match="q_scale must be positive"):
        native.layer_norm(x, quantize_to=(0.0, 0, torch.uint8))
    with pytest.raises(Exception, match="must have 8 elements"):
        native.layer_norm(x, quantize_to=(1.0, 0, torch.uint8), quantize_multipliers=torch.ones(7))
