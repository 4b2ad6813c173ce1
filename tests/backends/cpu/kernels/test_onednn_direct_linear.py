"""onednn_direct:qlinear (a direct oneDNN matmul primitive, ipexconvert.backends.cpu.onednn_direct) against QLinearOp.reference, with
the cases of the torch-oneDNN kernel (test_onednn_qlinear.py): rank 2 and 3, bias or none, float32 /
bfloat16 / requantized uint8 outputs, each unary post-op fused and a binary add as a torch tail; row
counts with one kernel and a bounded number of primitives; the binding's errors; what the factory
declines."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import context, run
from test_torch_onednn_qlinear import OUTPUTS, POST_OPS, SHAPES, X_SCALE, X_ZP, check, make, reference

from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.ir.ops._quant import quantize
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.backends.cpu.kernels.qlinear import onednn_direct_qlinear
from ipexconvert.backends.cpu.kernels.qlinear import torch_onednn_qlinear
from ipexconvert.runtime.kernels import resolve_kernel

pytestmark = [
    pytest.mark.skipif(not dnnl.usable(selected_isa()), reason=f"direct oneDNN layers unavailable: {dnnl.report()['error']}"),
    pytest.mark.skipif(not int8_allowed(selected_isa()), reason="int8 needs avx512_vnni"),
]


@pytest.mark.parametrize("post_ops", list(POST_OPS))
@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_matches_reference(shape, output, post_ops):
    attrs, tensors = make(shape, output, post_ops)
    kernel = onednn_direct_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}))
    if output == "uint8" and "add" in post_ops:  # a torch tail cannot follow a uint8 output
        assert kernel is None
        assert resolve_kernel(context("qlinear", attrs, tensors, {1, 2, 3})).name == "torch_onednn:qlinear"
        return
    assert kernel is not None and kernel.name == "onednn_direct:qlinear" and kernel.consumed_inputs == {1, 2, 3}
    check(run(kernel, tensors, {}), reference(attrs, tensors), attrs)


def test_row_counts_one_kernel_bounded_primitives():
    """Dynamic batch: one primitive per row count seen, at most 8 kept, an evicted one rebuilt and right."""
    attrs, tensors = make("3d", "bfloat16", "gelu")
    kernel = onednn_direct_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}, dynamic_batch=True))
    direct = dnnl.raw.Linear(tensors[1], tensors[2], tensors[3], "uint8", "float32", x_scale=X_SCALE,
                             x_zero_point=X_ZP)
    for batch in [*range(1, 11), 1]:
        xq = quantize(torch.randn(batch, 3, 33), X_SCALE, X_ZP, "uint8")
        inputs = [xq, *tensors[1:]]
        check(run(kernel, inputs, {"batch": batch}), reference(attrs, inputs), attrs)
        out = torch.empty(batch, 3, 17)
        direct.run(xq, out)
        check(out, reference({**attrs, "post_ops": [], "output_dtype": "float32"}, inputs), {})
        assert direct.plan_count() <= 8
    assert direct.plan_count() == 8


def test_binding_refuses_bad_tensors():
    w = torch.randint(-127, 128, (6, 4), dtype=torch.int8)
    scales = torch.full((6,), 0.01)
    with pytest.raises(ValueError, match="does not go with"):
        dnnl.raw.Linear(w, scales, None, "bfloat16", "bfloat16")
    with pytest.raises(ValueError, match=r"w_scales must be float32 \[6\]"):
        dnnl.raw.Linear(w, scales[:5], None, "uint8", "float32")
    with pytest.raises(ValueError, match="unsupported post-op elu"):
        dnnl.raw.Linear(w, scales, None, "uint8", "float32", post_op="elu")
    with pytest.raises(ValueError, match="per-channel weight scales"):
        dnnl.raw.Linear(w, None, None, "uint8", "float32")
    linear = dnnl.raw.Linear(w, scales, None, "uint8", "float32")
    x = torch.zeros(2, 3, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match="must end in in_features"):
        linear.run(torch.zeros(2, 5, dtype=torch.uint8), torch.empty(2, 6))
    with pytest.raises(ValueError, match="leading dims"):
        linear.run(x, torch.empty(3, 2, 6))
    with pytest.raises(ValueError, match="contiguous"):
        linear.run(x.transpose(0, 1), torch.empty(3, 2, 6))
    linear.run(torch.zeros(0, 4, dtype=torch.uint8), torch.empty(0, 6))  # no rows: nothing to do


def test_declines(monkeypatch):
    attrs, tensors = make("3d", "float32", "relu")
    assert onednn_direct_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}, isa="avx512")) is None  # no VNNI
    assert onednn_direct_qlinear(context("qlinear", attrs, tensors, {2, 3})) is None  # weight not a constant
    signed = [quantize(torch.randn(2, 3, 33), X_SCALE, 0, "int8"), *tensors[1:]]
    signed_attrs = dict(attrs, x_zero_point=0)  # (an int8 input's zero point is an int8 code)
    assert onednn_direct_qlinear(context("qlinear", signed_attrs, signed, {1, 2, 3})) is None  # uint8 activations only
    monkeypatch.setenv("IPEXCONVERT_ONEDNN_DIRECT", "0")
    assert resolve_kernel(context("qlinear", attrs, tensors, {1, 2, 3})).name == "torch_onednn:qlinear"


def test_input_zero_point_folded_into_the_bias_at_a_wide_layer():
    """fold_input_zero_point: the zero-point-free product plus the folded bias equals oneDNN's own
    zero-point handling, even where the uncentred int32 sums are largest (K = 3072, all-255 inputs)."""
    from ipexconvert.backends.cpu.kernels.qlinear import fold_input_zero_point

    g = torch.Generator().manual_seed(3)
    n, k, zp, x_scale = 64, 3072, 131, 0.02
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    w_scales, bias = torch.rand(n, generator=g) * 0.01 + 0.001, torch.randn(n, generator=g)
    x = torch.randint(0, 256, (8, k), generator=g, dtype=torch.uint8)
    x[0] = 255
    unchanged, no_zp = fold_input_zero_point(w, w_scales, bias, x_scale, 0)  # nothing to fold
    assert unchanged is bias and no_zp == 0
    folded, folded_zp = fold_input_zero_point(w, w_scales, bias, x_scale, zp)
    assert folded_zp == 0
    outputs = []
    for b, x_zp in ((bias, zp), (folded, 0)):
        linear = dnnl.raw.Linear(w, w_scales, b, "uint8", "float32", post_op="", x_scale=x_scale, x_zero_point=x_zp,
                                 y_scale=1.0, y_zero_point=0)
        out = torch.empty(8, n)
        linear.run(x, out)
        outputs.append(out)
    want = ((x.double() - zp) * x_scale) @ (w.double() * w_scales.double()[:, None]).t() + bias.double()
    scale = want.abs().max().item()
    for out in outputs:
        assert (out.double() - want).abs().max().item() / scale < 1e-5


@pytest.mark.parametrize("unary", ["none", "gelu"])
@pytest.mark.parametrize("shape", ["2d", "3d-no-bias"])
def test_smoothquant_multiplier_fused_into_uint8_output(shape, unary):
    """fold_requantize's form of a SmoothQuant quantize: [unary,] mul by a constant per-feature vector,
    uint8 output at scale 1. The direct kernel fuses the mul (it holds the vector); torch's operator path
    computes float32, multiplies and quantizes after. Both within one code of the reference."""
    attrs, tensors = make(shape, "uint8", unary)
    n = tensors[1].shape[0]
    multiplier = torch.rand(n, generator=torch.Generator().manual_seed(5)) * 150 + 50  # 1 / (smooth * scale)
    attrs = {**attrs, "output_scale": 1.0, "post_ops": [*attrs["post_ops"], {"kind": "mul", "operand": 4}]}
    tensors = [*tensors, multiplier]
    want = reference(attrs, tensors)
    assert want.unique().numel() > 30 and ((want == 0) | (want == 255)).any()  # many codes, and a clamp hit

    kernel = onednn_direct_qlinear(context("qlinear", attrs, tensors, {1, 2, 3, 4}))
    assert kernel is not None and kernel.consumed_inputs == {1, 2, 3, 4}
    check(run(kernel, tensors, {}), want, attrs)
    torch_path = torch_onednn_qlinear(context("qlinear", attrs, tensors, {1, 2, 3, 4}))
    check(run(torch_path, tensors, {}), want, attrs)
    # A multiplier that is not one constant per output feature stays out of the primitive: uint8 cannot take a tail.
    assert onednn_direct_qlinear(context("qlinear", attrs, [*tensors[:4], multiplier[:-1]], {1, 2, 3, 4})) is None
    assert onednn_direct_qlinear(context("qlinear", attrs, tensors, {1, 2, 3})) is None


def test_binding_multiplier_is_exact_and_checked():
    """The fused mul runs in float32 before rounding: codes equal a float64 reference exactly here."""
    g = torch.Generator().manual_seed(9)
    w = torch.randint(-127, 128, (40, 24), generator=g, dtype=torch.int8)
    w_scales, bias = torch.rand(40, generator=g) * 1e-2, torch.randn(40, generator=g)
    multiplier = torch.rand(40, generator=g) * 30 + 1
    x = torch.randint(0, 256, (9, 24), generator=g, dtype=torch.uint8)
    linear = dnnl.raw.Linear(w, w_scales, bias, "uint8", "uint8", post_op="gelu", multiplier=multiplier,
                             x_scale=0.02, x_zero_point=7, y_scale=1.0, y_zero_point=11)
    out = torch.empty(9, 40, dtype=torch.uint8)
    linear.run(x, out)
    real = torch.nn.functional.gelu(((x.double() - 7) * 0.02) @ (w.double() * w_scales.double()[:, None]).t() + bias.double())
    assert torch.equal(out.double(), torch.clamp(torch.round(real * multiplier.double()) + 11, 0, 255))
    with pytest.raises(ValueError, match=r"multiplier must be float32 \[40\]"):
        dnnl.raw.Linear(w, w_scales, bias, "uint8", "uint8", multiplier=multiplier[:39])
