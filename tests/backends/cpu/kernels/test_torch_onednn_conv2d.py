"""torch_onednn:conv2d against the conv2d reference: shapes, groups, stride/padding/dilation, every post-op
combination, float32 and bfloat16, channels-last and contiguous, one kernel at two batch sizes."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import (BF16_TOLERANCE, FP32_TOLERANCE, context, reference, rel_err, run,
                                  runs_at_selected_level)

from ipexconvert.ir.postops import PostOp
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import isa_allows, plan_post_ops
from ipexconvert.backends.cpu.kernels.conv2d import torch_onednn_conv2d

# Where torch's oneDNN cannot run (below avx2: IPEXCONVERT_MAX_ISA=generic) the factory declines every node
# (test_declines checks that at any level); the tests that run its kernel skip there.
RUNS_HERE = runs_at_selected_level("torch_onednn_conv2d", torch_onednn_conv2d.runs_at)
HAS_BF16 = "bfloat16" in probe.checked_dtypes() and isa_allows(selected_isa(), "bfloat16")
DTYPES = ["float32", pytest.param("bfloat16", marks=pytest.mark.skipif(not HAS_BF16, reason="no native bf16"))]

# (in channels, out channels, kernel (h, w), stride, padding, dilation, groups, input h, w, bias)
SHAPES = {
    "3x3": (8, 16, (3, 3), [1, 1], [1, 1], [1, 1], 1, 13, 11, True),
    "odd-strided-dilated-grouped": (12, 18, (5, 3), [2, 1], [2, 0], [1, 2], 3, 17, 9, True),
    "depthwise": (8, 8, (3, 3), [2, 2], [1, 1], [1, 1], 8, 10, 7, True),
    "1x1-no-bias": (5, 7, (1, 1), [1, 1], [0, 0], [1, 1], 1, 7, 5, False),
}

# Post-op lists; "op" marks the binary operand: full output shape unless noted.
POST_OPS = {
    "none": [],
    "relu": [{"kind": "relu"}],
    "gelu": [{"kind": "gelu"}],
    "gelu_tanh": [{"kind": "gelu_tanh"}],
    "silu": [{"kind": "silu"}],
    "sigmoid": [{"kind": "sigmoid"}],
    "tanh": [{"kind": "tanh"}],
    "add": [{"kind": "add", "operand": 3}],
    "add-relu": [{"kind": "add", "operand": 3}, {"kind": "relu"}],
    "add-relu-tanh": [{"kind": "add", "operand": 3}, {"kind": "relu"}, {"kind": "tanh"}],
    "add-gelu": [{"kind": "add", "operand": 3}, {"kind": "gelu"}],
    "mul-relu": [{"kind": "mul", "operand": 3}, {"kind": "relu"}],
    "relu-add": [{"kind": "relu"}, {"kind": "add", "operand": 3}],
    "silu-mul": [{"kind": "silu"}, {"kind": "mul", "operand": 3}],
}
OPERAND_SHAPES = ["full", "per-channel", "per-sample-channel", "per-channel-rank3", "scalar", "batch-broadcast"]


def make(shape: str, post_ops: list, dtype: str, channels_last: bool, operand: str = "full", batch: int = 2):
    cin, cout, k, stride, padding, dilation, groups, h, w, has_bias = SHAPES[shape]
    g = torch.Generator().manual_seed(sum(map(ord, shape + operand)))
    weight = torch.randn(cout, cin // groups, *k, generator=g) / (cin // groups * k[0] * k[1]) ** 0.5
    bias = torch.randn(cout, generator=g) if has_bias else None
    x = torch.randn(batch, cin, h, w, generator=g)  # drawn after the weights: they stay the same at any batch
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "post_ops": post_ops}
    tensors = [x, weight, bias]
    if any(p.get("operand") is not None for p in post_ops):
        y = torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups)
        shapes = {"full": y.shape, "per-channel": (1, cout, 1, 1), "per-sample-channel": (batch, cout, 1, 1),
                  "per-channel-rank3": (cout, 1, 1), "scalar": (1, 1, 1, 1), "batch-broadcast": (1, *y.shape[1:])}
        tensors.append(torch.randn(shapes[operand], generator=g))
    layout = torch.channels_last if channels_last else torch.contiguous_format
    cast = [None if t is None else t.to(getattr(torch, dtype)) for t in tensors]
    cast = [t.contiguous(memory_format=layout) if t is not None and t.dim() == 4 else t for t in cast]
    return attrs, tensors, cast


@RUNS_HERE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels_last", [True, False], ids=["channels_last", "contiguous"])
@pytest.mark.parametrize("post_ops", list(POST_OPS), ids=list(POST_OPS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_matches_reference(shape, post_ops, channels_last, dtype):
    attrs, exact, tensors = make(shape, POST_OPS[post_ops], dtype, channels_last)
    kernel = torch_onednn_conv2d(context("conv2d", attrs, tensors, {1, 2}))
    assert kernel is not None and kernel.name == "torch_onednn:conv2d"
    assert kernel.consumed_inputs == ({1, 2} if tensors[2] is not None else {1})
    got = run(kernel, tensors, {})
    assert got.dtype == tensors[0].dtype
    layout = torch.channels_last if channels_last else torch.contiguous_format
    assert got.is_contiguous(memory_format=layout)  # the layout the output spec states
    tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
    assert rel_err(got, reference("conv2d", attrs, exact)) < tolerance


@RUNS_HERE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("operand", OPERAND_SHAPES)
@pytest.mark.parametrize("post_ops", ["add-relu", "mul-relu"])
def test_broadcast_operands(post_ops, operand, dtype):
    attrs, exact, tensors = make("3x3", POST_OPS[post_ops], dtype, True, operand)
    kernel = torch_onednn_conv2d(context("conv2d", attrs, tensors, {1, 2}))
    tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
    assert rel_err(run(kernel, tensors, {}), reference("conv2d", attrs, exact)) < tolerance


@RUNS_HERE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("post_ops", ["relu", "add-relu"])
@pytest.mark.parametrize("shape", ["3x3", "odd-strided-dilated-grouped"])
def test_dynamic_batch_one_kernel(shape, post_ops, dtype):
    """Packed for a symbolic batch; the same kernel serves batch 1 and 5."""
    attrs, _, tensors = make(shape, POST_OPS[post_ops], dtype, True)
    kernel = torch_onednn_conv2d(context("conv2d", attrs, tensors, {1, 2}, dynamic_batch=True))
    assert kernel is not None
    for batch in (1, 5):
        _, exact, tensors = make(shape, POST_OPS[post_ops], dtype, True, batch=batch)
        got = run(kernel, tensors, {"batch": batch})
        assert got.shape[0] == batch
        tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
        assert rel_err(got, reference("conv2d", attrs, exact)) < tolerance


def test_fusion_plan():
    """What oneDNN takes: one unary; or add/mul, then relu after an add; the rest runs in torch."""
    ok = lambda p: True  # noqa: E731
    relu_only = frozenset({"relu"})
    ops = lambda *specs: [PostOp(**s) for s in specs]  # noqa: E731
    plan = plan_post_ops(ops(*POST_OPS["add-relu-tanh"]), ok, relu_only)
    assert plan.binary.kind == "add" and plan.binary_unary == ("relu", "") and [p.kind for p in plan.tail] == ["tanh"]
    plan = plan_post_ops(ops(*POST_OPS["add-gelu"]), ok, relu_only)
    assert plan.binary.kind == "add" and plan.binary_unary is None and [p.kind for p in plan.tail] == ["gelu"]
    plan = plan_post_ops(ops(*POST_OPS["gelu_tanh"]), ok, relu_only)
    assert plan.unary == ("gelu", "tanh") and not plan.tail
    plan = plan_post_ops(ops(*POST_OPS["silu-mul"]), ok, relu_only)
    assert plan.unary == ("swish", "") and [p.kind for p in plan.tail] == ["mul"]
    plan = plan_post_ops(ops(*POST_OPS["mul-relu"]), ok, relu_only)
    assert plan.binary.kind == "mul" and plan.binary_unary is None and [p.kind for p in plan.tail] == ["relu"]
    plan = plan_post_ops(ops(*POST_OPS["add-relu"]), lambda p: False, relu_only)
    assert plan.binary is None and plan.unary is None and len(plan.tail) == 2


def test_declines():
    attrs, _, tensors = make("3x3", [], "float32", True)
    assert torch_onednn_conv2d(context("conv2d", attrs, tensors, {2})) is None  # weight not a constant
    assert torch_onednn_conv2d(context("conv2d", attrs, tensors, {1})) is None  # bias not a constant
    mixed = [tensors[0], tensors[1].bfloat16(), tensors[2]]
    assert torch_onednn_conv2d(context("conv2d", attrs, mixed, {1, 2})) is None  # dtypes disagree
    assert torch_onednn_conv2d(context("conv2d", attrs, tensors, {1, 2}, isa="generic")) is None  # ISA capped
    bf16 = [t.bfloat16() for t in tensors]
    assert torch_onednn_conv2d(context("conv2d", attrs, bf16, {1, 2}, isa="avx512")) is None  # no native bf16 allowed


def test_env_switch_turns_kernels_off(monkeypatch):
    attrs, _, tensors = make("3x3", [], "float32", True)
    monkeypatch.setenv("IPEXCONVERT_ONEDNN", "0")
    assert torch_onednn_conv2d(context("conv2d", attrs, tensors, {1, 2})) is None
