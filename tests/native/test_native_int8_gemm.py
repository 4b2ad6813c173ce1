"""int8_gemm: the exact uint8 x int8 GEMM for CPUs without VNNI, against integer arithmetic in
float64 (exact for these sizes), every output dtype, tails in m, n and k, strided rows, the
worst-case codes that saturate vpmaddubsw, and argument errors."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.backends.cpu.kernels._runs_at import native_kernel
from ipexconvert.ir.ops._quant import quantize

pytestmark = [
    pytest.mark.skipif(not native.available(), reason="the native extension is not built"),
    pytest.mark.skipif(native.available() and "avx2" not in native.supported_levels(), reason="this CPU has no AVX2"),
]


# int8_gemm's lowest build is avx2: at the generic level (IPEXCONVERT_MAX_ISA=generic) it has none, and the tests that
# run it skip; the packing and argument checks run at any level.
NOT_HERE = native_kernel("int8_gemm")(native.selected_level()) if native.available() else None
RUNS_HERE = pytest.mark.skipif(NOT_HERE is not None,
                               reason=f"int8_gemm cannot run at the selected ISA level: {NOT_HERE}")

SHAPES = [(1, 1, 1), (1, 16, 2), (5, 3, 3), (7, 33, 65), (6, 16, 32), (13, 40, 768), (64, 130, 257)]


def exact(a, zp, w, scales, bias, relu):
    v = ((a.long() - zp).double() @ w.double().T) * scales.double()
    if bias is not None:
        v = v + bias.double()
    return v.clamp_min(0) if relu else v


def operands(m, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 256, (m, k), dtype=torch.uint8, generator=g)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g)
    scales = torch.rand(n, generator=g) * 1e-3 + 1e-5
    bias = torch.randn(n, generator=g)
    return a, w, scales, bias


@RUNS_HERE
@pytest.mark.parametrize("m, n, k", SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_float32_output_matches_exact_integer_products(m, n, k, relu):
    a, w, scales, bias = operands(m, n, k)
    got = native.int8_gemm(a, 131, native.pack_int8_weight(w), n, scales, bias, relu=relu)
    want = exact(a, 131, w, scales, bias, relu)
    # float(acc) * scale + bias in float32: a few ulps of the largest value
    assert got.dtype == torch.float32 and got.shape == (m, n)
    assert ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item() < 1e-6


@RUNS_HERE
def test_worst_case_codes_are_exact():
    """255 * -128 twice in a row overflows vpmaddubsw's int16 pair sum; here the sums stay exact."""
    k, n = 512, 16
    a = torch.full((3, k), 255, dtype=torch.uint8)
    w = torch.full((n, k), -128, dtype=torch.int8)
    ones = torch.ones(n)
    got = native.int8_gemm(a, 0, native.pack_int8_weight(w), n, ones)
    assert torch.equal(got, torch.full((3, n), 255.0 * -128 * k))
    got = native.int8_gemm(a, 255, native.pack_int8_weight(w), n, ones)  # zero point at the top: all zero
    assert torch.equal(got, torch.zeros(3, n))


@RUNS_HERE
@pytest.mark.parametrize("out_dtype", [torch.uint8, torch.int8])
@pytest.mark.parametrize("relu", [False, True])
def test_quantized_output_is_the_quantize_formula_of_the_float_result(out_dtype, relu):
    m, n, k = 9, 37, 100
    a, w, scales, bias = operands(m, n, k, seed=1)
    packed = native.pack_int8_weight(w)
    zp = 100 if out_dtype == torch.uint8 else -3
    got = native.int8_gemm(a, 17, packed, n, scales, bias, relu=relu, out_dtype=out_dtype, out_scale=0.02,
                           out_zero_point=zp)
    as_float = native.int8_gemm(a, 17, packed, n, scales, bias, relu=relu)
    want = quantize(as_float, 0.02, zp, "uint8" if out_dtype == torch.uint8 else "int8")
    assert got.dtype == out_dtype and torch.equal(got, want)
    # and within one code of the exact product's code
    exact_codes = quantize(exact(a, 17, w, scales, bias, relu).float(), 0.02, zp, "uint8" if out_dtype == torch.uint8 else "int8")
    assert (got.int() - exact_codes.int()).abs().max().item() <= 1


@RUNS_HERE
def test_bfloat16_output_is_the_rounded_float_result():
    a, w, scales, bias = operands(11, 50, 64, seed=2)
    packed = native.pack_int8_weight(w)
    got = native.int8_gemm(a, 3, packed, 50, scales, bias, out_dtype=torch.bfloat16)
    want = native.int8_gemm(a, 3, packed, 50, scales, bias).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)


@RUNS_HERE
def test_nan_bias_stays_nan_through_relu():
    a, w, scales, bias = operands(2, 16, 8, seed=3)
    bias[5] = float("nan")
    got = native.int8_gemm(a, 0, native.pack_int8_weight(w), 16, scales, bias, relu=True)
    assert torch.isnan(got[:, 5]).all() and not torch.isnan(got[:, :5]).any()


@RUNS_HERE
def test_strided_rows_read_and_write_in_place():
    a, w, scales, bias = operands(6, 24, 40, seed=4)
    wide = torch.zeros(6, 100, dtype=torch.uint8)
    wide[:, 10:50] = a
    out = torch.full((6, 30), -1.0)
    native.raw.int8_gemm(wide[:, 10:50], 5, native.pack_int8_weight(w), 24, scales, bias, False, out[:, 3:27],
                         1.0, 0, None, 1)
    torch.testing.assert_close(out[:, 3:27], native.int8_gemm(a, 5, native.pack_int8_weight(w), 24, scales, bias))
    assert (out[:, :3] == -1).all() and (out[:, 27:] == -1).all()


@RUNS_HERE
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_agree(threads):
    a, w, scales, bias = operands(50, 200, 300, seed=5)
    packed = native.pack_int8_weight(w)
    one = native.int8_gemm(a, 9, packed, 200, scales, bias, threads=1)
    assert torch.equal(native.int8_gemm(a, 9, packed, 200, scales, bias, threads=threads), one)


def test_packing_layout():
    w = torch.arange(-20, 20, dtype=torch.int8).view(2, 20)[:, :5].contiguous()  # n=2, k=5
    packed = native.pack_int8_weight(w)
    assert packed.dtype == torch.int16 and packed.shape == (1, 3, 16, 2)
    assert packed[0, 1, 0].tolist() == [w[0, 2].item(), w[0, 3].item()]
    assert packed[0, 2, 1].tolist() == [w[1, 4].item(), 0]  # k padded to even
    assert packed[0, :, 2:].abs().sum() == 0  # n padded to 16


@pytest.mark.parametrize("change, message", [
    (lambda args: args.update(a=args["a"].float()), "a must be a 2-D uint8 tensor"),
    (lambda args: args.update(a=args["a"][:, ::2]), "contiguous rows"),
    (lambda args: args.update(w=args["w"][:-1]), "packed int16 weight"),
    (lambda args: args.update(n=args["n"] + 16), "packed int16 weight"),
    (lambda args: args.update(scales=args["scales"][:3]), "scales"),
    (lambda args: args.update(bias=torch.zeros(2)), "bias"),
    (lambda args: args.update(out=torch.empty(4, 15)), "out"),
    (lambda args: args.update(out=torch.empty(4, 16, dtype=torch.float64)), "out has dtype"),
    (lambda args: args.update(a_zero_point=256), "a_zero_point"),
    (lambda args: args.update(out=torch.empty(4, 16, dtype=torch.uint8), out_scale=0.0), "out_scale"),
    (lambda args: args.update(out=torch.empty(4, 16, dtype=torch.uint8), out_zero_point=300), "out_zero_point"),
])
def test_bad_arguments_are_clear_errors(change, message):
    a, w, scales, bias = operands(4, 16, 8)
    args = dict(a=a, a_zero_point=0, w=native.pack_int8_weight(w), n=16, scales=scales, bias=bias, relu=False,
                out=torch.empty(4, 16), out_scale=1.0, out_zero_point=0)
    change(args)
    with pytest.raises(ValueError, match=message):
        native.raw.int8_gemm(args["a"], args["a_zero_point"], args["w"], args["n"], args["scales"], args["bias"],
                             args["relu"], args["out"], args["out_scale"], args["out_zero_point"], None, 1)


@RUNS_HERE
@pytest.mark.parametrize("geometry", [
    dict(k=3, stride=1, pad=1, dilation=1), dict(k=3, stride=2, pad=1, dilation=1), dict(k=1, stride=2, pad=0, dilation=1),
    dict(k=7, stride=2, pad=3, dilation=1), dict(k=3, stride=1, pad=2, dilation=2), dict(k=1, stride=1, pad=0, dilation=1),
])
def test_convolution_rows_gathered_from_the_image(geometry):
    """conv=(...): the rows are the patches of an NHWC image, taps in the padding add nothing."""
    g = torch.Generator().manual_seed(6)
    x = torch.randint(0, 256, (2, 5, 9, 11), dtype=torch.uint8, generator=g)  # NCHW codes
    k = geometry["k"]
    w = torch.randint(-128, 128, (20, 5, k, k), dtype=torch.int8, generator=g)
    scales, bias = torch.rand(20, generator=g) * 1e-3, torch.randn(20, generator=g)
    zp = 77
    want = torch.nn.functional.conv2d((x.double() - zp), w.double(), None, geometry["stride"], geometry["pad"],
                                      geometry["dilation"]) * scales.double().view(1, -1, 1, 1) + bias.double().view(1, -1, 1, 1)
    packed = native.pack_int8_weight(w.permute(0, 2, 3, 1).reshape(20, -1).contiguous())
    n, _, oh, ow = want.shape
    out = torch.empty(n * oh * ow, 20)
    conv = [k, k, geometry["stride"], geometry["stride"], geometry["pad"], geometry["pad"], geometry["dilation"],
            geometry["dilation"]]
    native.raw.int8_gemm(x.permute(0, 2, 3, 1).contiguous(), zp, packed, 20, scales, bias, False, out, 1.0, 0, None, 2,
                         None, 1.0, 0, conv)
    got = out.view(n, oh, ow, 20).permute(0, 3, 1, 2)
    assert ((got.double() - want).abs().max() / want.abs().max()).item() < 1e-6


@RUNS_HERE
@pytest.mark.parametrize("kind", ["uint8", "float32"])
@pytest.mark.parametrize("relu", [False, True])
def test_residual_added_before_relu(kind, relu):
    a, w, scales, bias = operands(10, 40, 70, seed=8)
    g = torch.Generator().manual_seed(9)
    if kind == "uint8":
        residual = torch.randint(0, 256, (10, 40), dtype=torch.uint8, generator=g)
        added, r_scale, r_zp = (residual.double() - 120) * 0.05, 0.05, 120
    else:
        residual = torch.randn(10, 40, generator=g)
        added, r_scale, r_zp = residual.double(), 1.0, 0
    out = torch.empty(10, 40)
    native.raw.int8_gemm(a, 3, native.pack_int8_weight(w), 40, scales, bias, relu, out, 1.0, 0, None, 1,
                         residual, r_scale, r_zp, None)
    want = exact(a, 3, w, scales, bias, False) + added
    want = want.clamp_min(0) if relu else want
    assert ((out.double() - want).abs().max() / want.abs().max()).item() < 1e-6


@pytest.mark.parametrize("change, message", [
    (dict(conv=[3, 3, 1, 1, 1, 1, 1]), "conv must be"),
    (dict(conv=[3, 3, 0, 1, 1, 1, 1, 1]), "out of range"),
    (dict(conv=[9, 9, 1, 1, 0, 0, 1, 1]), "does not fit"),
    (dict(residual=torch.zeros(4, 15)), "residual"),
    (dict(residual=torch.zeros(4, 16, dtype=torch.int32)), "residual has dtype"),
    (dict(residual=torch.zeros(4, 16, dtype=torch.uint8), residual_scale=0.0), "residual_scale"),
])
def test_bad_conv_and_residual_arguments(change, message):
    image = torch.zeros(1, 4, 4, 2, dtype=torch.uint8)
    w = torch.zeros(16, 18 if "conv" in change else 8, dtype=torch.int8)
    a = image if "conv" in change else torch.zeros(4, 8, dtype=torch.uint8)
    args = {**dict(residual=None, residual_scale=1.0, residual_zero_point=0, conv=None), **change}
    with pytest.raises(ValueError, match=message):
        native.raw.int8_gemm(a, 0, native.pack_int8_weight(w), 16, torch.ones(16), None, False, torch.empty(4, 16), 1.0,
                             0, None, 1, args["residual"], args["residual_scale"], args["residual_zero_point"], args["conv"])
