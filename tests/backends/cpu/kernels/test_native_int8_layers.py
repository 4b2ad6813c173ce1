"""native:qlinear and native:qconv2d (runtime/native_kernels/_int8_gemm.py): the exact int8 GEMM where
oneDNN's int8 does not run (below avx512_vnni), against the ops' references on the same integer
inputs, with the same cases as the oneDNN kernels' tests; and the levels where it is chosen."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import context, run
from test_torch_onednn_qconv2d import POST_OPS as CONV_POST_OPS
from test_torch_onednn_qconv2d import make as make_conv
from test_torch_onednn_qconv2d import reference as conv_reference
from test_torch_onednn_qlinear import OUTPUTS, POST_OPS, SHAPES, check
from test_torch_onednn_qlinear import make as make_linear
from test_torch_onednn_qlinear import reference as linear_reference

import native_ops as native
from ipexconvert.runtime.kernels import resolve_kernel
from ipexconvert.backends.cpu import isa_caps, onednn_direct
from ipexconvert.backends.cpu.kernels.qconv2d import native_qconv2d
from ipexconvert.backends.cpu.kernels.qlinear import native_qlinear

pytestmark = pytest.mark.skipif(not native.available() or "avx2" not in native.supported_levels(),
                                reason="needs the native extension on an AVX2 CPU")


@pytest.mark.parametrize("post_ops", list(POST_OPS))
@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_qlinear_matches_reference(shape, output, post_ops):
    attrs, tensors = make_linear(shape, output, post_ops)
    kernel = native_qlinear(context("qlinear", attrs, tensors, {1, 2, 3} if tensors[3] is not None else {1, 2},
                                    isa="avx2"))
    assert kernel is not None and kernel.name == "native:qlinear@avx2"
    check(run(kernel, tensors, {}), linear_reference(attrs, tensors), attrs)


@pytest.mark.parametrize("post_ops", list(CONV_POST_OPS))
@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("batch", [1, 3])
def test_qconv2d_matches_reference(batch, output, post_ops):
    attrs, tensors = make_conv(1, output, post_ops, batch=batch)
    kernel = native_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa="avx2"))
    assert kernel is not None and kernel.name == "native:qconv2d@avx2"
    got = run(kernel, tensors, {})
    check(got, conv_reference(attrs, tensors), attrs)
    assert got.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("conv", [
    {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "kernel": 1},  # rows straight from the NHWC view
    {"stride": [2, 2], "padding": [0, 0], "dilation": [1, 1], "kernel": 1},
    {"stride": [1, 1], "padding": [3, 3], "dilation": [1, 1], "kernel": 7},
])
def test_qconv2d_geometries(conv):
    attrs, tensors = make_conv(1, "uint8", "relu", batch=2)
    g = torch.Generator().manual_seed(7)
    k = conv.pop("kernel")
    tensors[1] = torch.randint(-127, 128, (12, 8, k, k), dtype=torch.int8, generator=g)
    attrs = {**attrs, **conv}
    kernel = native_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa="avx2"))
    check(run(kernel, tensors, {}), conv_reference(attrs, tensors), attrs)


def test_qconv2d_nchw_input():
    attrs, tensors = make_conv(1, "float32", "none", batch=2)
    tensors[0] = tensors[0].contiguous()
    kernel = native_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa="avx2"))
    check(run(kernel, tensors, {}), conv_reference(attrs, tensors), attrs)


@pytest.mark.parametrize("isa, chosen", [("generic", False), ("avx2", True), ("avx512", True),
                                         ("avx512_vnni", False), ("amx", False)])
def test_chosen_only_between_avx2_and_vnni(isa, chosen, monkeypatch):
    # the rule by level for an uncapped oneDNN (a process whose oneDNN took a lower cap keeps these: onednn_level)
    monkeypatch.setattr(isa_caps, "applied", {})
    monkeypatch.setattr(onednn_direct, "_isa_cap", None)
    attrs, tensors = make_linear("2d", "float32", "relu")
    assert (native_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}, isa=isa)) is not None) == chosen
    attrs, tensors = make_conv(1, "float32", "relu")
    assert (native_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa=isa)) is not None) == chosen


def test_declines_grouped_conv_and_int8_activations():
    attrs, tensors = make_conv(2, "float32", "none")
    assert native_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa="avx2")) is None
    attrs, tensors = make_linear("2d", "float32", "none")
    tensors[0] = (tensors[0].int() - 128).to(torch.int8)
    attrs["x_zero_point"] -= 128  # the same values, as int8 codes
    assert native_qlinear(context("qlinear", attrs, tensors, {1, 2, 3}, isa="avx2")) is None


def test_the_registry_picks_it_at_avx2():
    attrs, tensors = make_linear("3d", "uint8", "gelu")
    assert resolve_kernel(context("qlinear", attrs, tensors, {1, 2, 3}, isa="avx2")).name == "native:qlinear@avx2"
