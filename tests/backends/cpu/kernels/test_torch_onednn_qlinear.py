"""torch_onednn:qlinear against QLinearOp.reference on the same integer inputs: rank 2 and 3 inputs, odd
sizes, bias or none, float32 / bfloat16 / requantized uint8 outputs, each unary post-op fused and a
binary add run as a torch tail (before the requantization of a uint8 output); the factory declines
where oneDNN int8 cannot run the node (ISA below avx512_vnni, IPEXCONVERT_ONEDNN=0, int8 activation)."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import BF16_TOLERANCE, context, rel_err, run

from ipexconvert.ir.ops._quant import dequantize, quantize
from ipexconvert.ir.ops.qlinear import QLinearOp
from ipexconvert.quant.weights import quantize_weight
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.backends.cpu.kernels.qlinear import torch_onednn_qlinear
from ipexconvert.runtime.kernels import resolve_kernel

pytestmark = pytest.mark.skipif(
    not int8_allowed(selected_isa()) or probe.op_for("onednn.qlinear_pointwise", "int8") is None,
    reason="no oneDNN int8 here (needs avx512_vnni and a passing probe)")

FP32_TOLERANCE = 1e-3  # int32 accumulation is exact; only the order of the scaling differs
X_SCALE, X_ZP = 0.03, 131
OUTPUTS = {
    "float32": {},
    "bfloat16": {"output_dtype": "bfloat16"},
    "uint8": {"output_dtype": "uint8", "output_scale": 0.05, "output_zero_point": 100},
}
# (leading dims of x, in features, out features, bias)
SHAPES = {"2d": ((5,), 24, 17, True), "3d": ((2, 3), 33, 17, True), "3d-no-bias": ((3, 7), 33, 9, False)}
POST_OPS = {"none": [], "relu": [{"kind": "relu"}], "gelu": [{"kind": "gelu"}],
            "gelu_tanh": [{"kind": "gelu_tanh"}], "silu": [{"kind": "silu"}],
            "add": [{"kind": "add", "operand": 4}], "relu-add": [{"kind": "relu"}, {"kind": "add", "operand": 4}]}


def make(shape: str, output: str, post_ops: str):
    """(attrs, [xq, weight int8, weight scales, bias, operand?])."""
    lead, k, n, has_bias = SHAPES[shape]
    g = torch.Generator().manual_seed(sum(map(ord, shape)))
    wq, ws = quantize_weight(torch.randn(n, k, generator=g) / k ** 0.5)
    bias = torch.randn(n, generator=g) if has_bias else None
    xq = quantize(torch.randn(*lead, k, generator=g), X_SCALE, X_ZP, "uint8")
    tensors = [xq, wq, ws, bias]
    if any(p.get("operand") is not None for p in POST_OPS[post_ops]):
        operand_dtype = torch.float32 if output == "uint8" else getattr(torch, output)
        tensors.append(torch.randn(*lead, n, generator=g).to(operand_dtype))
    return {"x_scale": X_SCALE, "x_zero_point": X_ZP, "post_ops": POST_OPS[post_ops], **OUTPUTS[output]}, tensors


def check(got: torch.Tensor, want: torch.Tensor, attrs: dict) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == torch.uint8:  # requantized: at most one code apart, compared dequantized
        scale, zp = attrs["output_scale"], attrs["output_zero_point"]
        assert (got.int() - want.int()).abs().max() <= 1
        assert (dequantize(got, scale, zp) - dequantize(want, scale, zp)).abs().max() <= scale * 1.001
    else:
        tolerance = FP32_TOLERANCE if got.dtype == torch.float32 else BF16_TOLERANCE
        assert rel_err(got, want.float()) < tolerance


def reference(attrs: dict, tensors) -> torch.Tensor:
    return QLinearOp.reference(tensors, QLinearOp.parse_attrs(attrs), {})


@pytest.mark.parametrize("post_ops", list(POST_OPS))
@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_matches_reference(shape, output, post_ops):
    attrs, tensors = make(shape, output, post_ops)
    kernel = torch_onednn_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}))
    assert kernel is not None and kernel.name == "torch_onednn:qlinear"
    assert kernel.consumed_inputs == {1, 2, 3}
    check(run(kernel, tensors, {}), reference(attrs, tensors), attrs)


def test_dynamic_batch_one_kernel():
    attrs, tensors = make("3d", "float32", "gelu")
    kernel = torch_onednn_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}, dynamic_batch=True))
    for batch in (1, 4):
        xq = quantize(torch.randn(batch, 3, 33), X_SCALE, X_ZP, "uint8")
        got = run(kernel, [xq, *tensors[1:]], {"batch": batch})
        check(got, reference(attrs, [xq, *tensors[1:]]), attrs)


def test_declines(monkeypatch):
    attrs, tensors = make("3d", "float32", "relu")
    assert torch_onednn_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}, isa="avx512")) is None  # no VNNI
    assert torch_onednn_qlinear(context("qlinear", attrs, tensors, {2, 3})) is None  # weight not a constant
    signed = [quantize(torch.randn(2, 3, 33), X_SCALE, 0, "int8"), *tensors[1:]]
    signed_attrs = dict(attrs, x_zero_point=0)  # (an int8 input's zero point is an int8 code)
    assert torch_onednn_qlinear(context("qlinear", signed_attrs, signed, {1, 2, 3})) is None  # oneDNN takes uint8 only
    monkeypatch.setenv("IPEXCONVERT_ONEDNN", "0")
    ctx = context("qlinear", attrs, tensors, {1, 2, 3})
    assert torch_onednn_qlinear(ctx) is None
    assert resolve_kernel(ctx).name == "reference:qlinear"
