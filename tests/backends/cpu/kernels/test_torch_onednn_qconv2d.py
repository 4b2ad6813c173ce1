"""torch_onednn:qconv2d against QConv2dOp.reference on the same integer inputs: channels-last uint8 input,
groups 1 and 2, asymmetric stride/padding/dilation, float32 / bfloat16 / requantized uint8 outputs,
relu fused, the residual add (+relu) fused through the .binary op without touching the residual
tensor it was given, a uint8 residual (accum_scale) summed into a uint8 output or added in torch
for a float one, a contiguous input giving a contiguous output, one kernel at batch 1 and 3,
and where the factory declines (also when the probe finds the uint8 accumulator mishandled)."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import torch_operators_only  # noqa: F401  (autouse)
from torch_onednn_helpers import context, run
from test_torch_onednn_qlinear import OUTPUTS, X_SCALE, X_ZP, check

from ipexconvert.ir.ops._quant import quantize
from ipexconvert.ir.ops.qconv2d import QConv2dOp
from ipexconvert.quant.weights import quantize_weight
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.backends.cpu.kernels.qconv2d import torch_onednn_qconv2d
from ipexconvert.runtime.kernels import resolve_kernel


pytestmark = pytest.mark.skipif(
    not int8_allowed(selected_isa()) or probe.op_for("onednn.qconv2d_pointwise", "int8") is None,
    reason="no oneDNN int8 here (needs avx512_vnni and a passing probe)")

CL = torch.channels_last
CONV = {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]}
POST_OPS = {"none": [], "relu": [{"kind": "relu"}], "add": [{"kind": "add", "operand": 4}],
            "add-relu": [{"kind": "add", "operand": 4}, {"kind": "relu"}]}


def make(groups: int, output: str, post_ops: str, batch: int = 2, bias: bool = True):
    """(attrs, [xq channels-last, weight int8, weight scales, bias, residual?]); weights do not depend on batch."""
    g = torch.Generator().manual_seed(groups)
    wq, ws = quantize_weight(torch.randn(12, 8 // groups, 3, 3, generator=g) / (8 // groups * 9) ** 0.5)
    b = torch.randn(12, generator=g) if bias else None
    x = torch.randn(batch, 8, 11, 9, generator=g).contiguous(memory_format=CL)
    attrs = {"x_scale": X_SCALE, "x_zero_point": X_ZP, "groups": groups, **CONV, "post_ops": POST_OPS[post_ops],
             **OUTPUTS[output]}
    tensors = [quantize(x, X_SCALE, X_ZP, "uint8").contiguous(memory_format=CL), wq, ws, b]
    if post_ops.startswith("add"):
        shape = QConv2dOp.reference(tensors, QConv2dOp.parse_attrs({**attrs, "post_ops": []}), {}).shape
        dtype = torch.float32 if output == "uint8" else getattr(torch, output)
        tensors.append(torch.randn(shape, generator=g).to(dtype).contiguous(memory_format=CL))
    return attrs, tensors


def reference(attrs: dict, tensors) -> torch.Tensor:
    return QConv2dOp.reference(tensors, QConv2dOp.parse_attrs(attrs), {})


@pytest.mark.parametrize("post_ops", list(POST_OPS))
@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("groups", [1, 2])
def test_matches_reference(groups, output, post_ops):
    attrs, tensors = make(groups, output, post_ops)
    kernel = torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}))
    if output == "uint8" and post_ops.startswith("add"):  # a requantized output cannot take a torch tail
        assert kernel is None
        return
    assert kernel is not None and kernel.name == "torch_onednn:qconv2d" and kernel.consumed_inputs == {1, 2, 3}
    residual = tensors[4].clone() if len(tensors) > 4 else None
    got = run(kernel, tensors, {})
    assert got.is_contiguous(memory_format=CL)  # the layout the output spec states
    check(got, reference(attrs, tensors), attrs)
    if residual is not None:  # oneDNN accumulates into its operand: the kernel must pass a copy
        assert torch.equal(tensors[4], residual)


@pytest.mark.parametrize("output,post_ops", [("float32", "none"), ("uint8", "relu"), ("bfloat16", "add-relu")])
def test_contiguous_input_gives_contiguous_output(output, post_ops):
    """oneDNN answers channels-last whatever the input: the kernel returns the layout the spec states."""
    attrs, tensors = make(1, output, post_ops)
    tensors = [None if t is None else t.contiguous() for t in tensors]
    got = run(torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3})), tensors, {})
    assert got.is_contiguous()
    check(got, reference(attrs, tensors), attrs)


def test_no_bias():
    attrs, tensors = make(1, "float32", "relu", bias=False)
    kernel = torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}))
    check(run(kernel, tensors, {}), reference(attrs, tensors), attrs)


def test_residual_add_is_fused(monkeypatch):
    """The add runs inside oneDNN (.binary), not as a torch tail: with the tail disabled it still adds."""
    import ipexconvert.backends.cpu.kernels.qconv2d as module

    monkeypatch.setattr(module, "with_tail", lambda fn, tail: fn if not tail else pytest.fail("add left to torch"))
    attrs, tensors = make(1, "bfloat16", "add-relu")
    check(run(torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3})), tensors, {}), reference(attrs, tensors),
          attrs)


@pytest.mark.parametrize("output,post_ops", [("float32", "relu"), ("bfloat16", "add-relu"), ("uint8", "relu")])
def test_dynamic_batch_one_kernel(output, post_ops):
    attrs, tensors = make(2, output, post_ops)
    kernel = torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, dynamic_batch=True))
    assert kernel is not None
    for batch in (1, 3):
        _, tensors = make(2, output, post_ops, batch=batch)
        got = run(kernel, tensors, {"batch": batch})
        assert got.shape[0] == batch
        check(got, reference(attrs, tensors), attrs)


def test_declines(monkeypatch):
    attrs, tensors = make(1, "float32", "relu")
    assert torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa="avx512")) is None  # no VNNI
    assert torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {2, 3})) is None  # weight not a constant
    signed = [tensors[0].to(torch.int8), *tensors[1:]]
    signed_attrs = dict(attrs, x_zero_point=0)  # (an int8 input's zero point is an int8 code)
    assert torch_onednn_qconv2d(context("qconv2d", signed_attrs, signed, {1, 2, 3})) is None  # oneDNN takes uint8 only
    monkeypatch.setenv("IPEXCONVERT_ONEDNN", "0")
    ctx = context("qconv2d", attrs, tensors, {1, 2, 3})
    assert torch_onednn_qconv2d(ctx) is None
    assert resolve_kernel(ctx).name == "reference:qconv2d"


ACCUM = {"accum_scale": 0.04, "accum_zero_point": 110}


def make_u8_accum(groups: int, output: str, post_ops: str):
    """make() with the residual in uint8 (accum_scale / accum_zero_point): int8_residual's output."""
    attrs, tensors = make(groups, output, post_ops)
    residual = tensors[4].float() * 2
    tensors[4] = quantize(residual, ACCUM["accum_scale"], ACCUM["accum_zero_point"], "uint8").contiguous(
        memory_format=CL)
    return {**attrs, **ACCUM}, tensors


@pytest.mark.parametrize("post_ops", ["add", "add-relu"])
@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("groups", [1, 2])
def test_uint8_accumulator(groups, output, post_ops):
    """uint8 out: oneDNN's .binary sums the uint8 accumulator; float out (oneDNN refuses it): the
    dequantized add in torch. Either way the residual the kernel was given is left untouched."""
    attrs, tensors = make_u8_accum(groups, output, post_ops)
    residual = tensors[4].clone()
    kernel = torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}))
    assert kernel is not None and kernel.name == "torch_onednn:qconv2d"
    got = run(kernel, tensors, {})
    assert got.is_contiguous(memory_format=CL)
    check(got, reference(attrs, tensors), attrs)
    assert torch.equal(tensors[4], residual)


def test_uint8_accumulator_dynamic_batch():
    attrs, tensors = make_u8_accum(1, "uint8", "add-relu")
    kernel = torch_onednn_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, dynamic_batch=True))
    for batch in (1, 3):
        _, tensors = make(1, "uint8", "add-relu", batch=batch)
        tensors[4] = quantize(tensors[4], ACCUM["accum_scale"], ACCUM["accum_zero_point"], "uint8").contiguous(
            memory_format=CL)
        check(run(kernel, tensors, {"batch": batch}), reference(attrs, tensors), attrs)


class DropsAccumZeroPoint:
    """Stands in for a .binary op that ignores a uint8 accumulator's zero point."""

    def __init__(self, op):
        self._op, self._schema = op, op._schema

    def __call__(self, *args):
        args = list(args)
        if args[14] is None:  # uint8 output: the uint8-accumulator call
            args[16] = 0
        return self._op(*args)


def test_uint8_accumulator_mishandled_fails_the_probe_and_the_reference_runs(monkeypatch):
    real, binary = probe.resolve_op, "onednn.qconv2d_pointwise.binary"
    monkeypatch.setattr(probe, "resolve_op", lambda name: DropsAccumZeroPoint(real(name)) if name == binary
                        else real(name))
    probe.reset()
    try:
        with pytest.warns(RuntimeWarning, match=binary):
            assert probe.op_for(binary, "int8") is None
        assert probe.op_for("onednn.qconv2d_pointwise", "int8") is not None  # only the .binary op is off
        attrs, tensors = make_u8_accum(1, "uint8", "add-relu")
        ctx = context("qconv2d", attrs, tensors, {1, 2, 3})
        assert torch_onednn_qconv2d(ctx) is None  # a uint8 output cannot take the add in torch
        assert resolve_kernel(ctx).name == "reference:qconv2d"
    finally:
        monkeypatch.undo()
        probe.reset()  # later tests probe the real ops again
