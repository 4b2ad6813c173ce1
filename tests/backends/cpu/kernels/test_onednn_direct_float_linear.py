"""onednn_direct:linear (our oneDNN matmul for float linears) against the linear reference, with the cases of the
torch-oneDNN linear kernel (test_torch_onednn_linear.py): rank 2 and 3, bias or none, every post-op combination
(one unary fused, the rest as a torch tail), one kernel over several batch sizes; the level rule (avx512_bf16
only) and which dtypes the factory takes."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from torch_onednn_helpers import BF16_TOLERANCE, FP32_TOLERANCE, context, reference, rel_err, run
from test_torch_onednn_linear import POST_OPS, SHAPES, make

from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels import _runs_at
from ipexconvert.backends.cpu.kernels._torch_onednn import isa_allows, mkl_runs_float32_linear
from ipexconvert.backends.cpu.kernels.linear import onednn_direct_linear, widens_many_rows

pytestmark = pytest.mark.skipif(not dnnl.usable(selected_isa()),
                                reason=f"direct oneDNN layers unavailable: {dnnl.report()['error']}")


def takes(dtype: str) -> bool:
    """Whether the factory takes a linear of this dtype on this CPU (the dtypes torch's oneDNN operator would run)."""
    if dtype == "float32":
        return not mkl_runs_float32_linear()
    return isa_allows(selected_isa(), dtype) and not widens_many_rows(selected_isa(), dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("post_ops", list(POST_OPS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_matches_reference(shape, post_ops, dtype):
    attrs, exact, tensors = make(shape, post_ops, dtype)
    kernel = onednn_direct_linear(context("linear", attrs, tensors, {1, 2}))
    if not takes(dtype):
        assert kernel is None
        return
    assert kernel is not None and kernel.name == "onednn_direct:linear"
    assert kernel.consumed_inputs == ({1, 2} if tensors[2] is not None else {1})
    got = run(kernel, tensors, {})
    assert got.dtype == tensors[0].dtype and got.shape == reference("linear", attrs, exact).shape
    tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
    assert rel_err(got, reference("linear", attrs, exact)) < tolerance


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_kernel_over_batch_sizes(dtype):
    if not takes(dtype):
        pytest.skip(f"{dtype} linear is not this factory's on this CPU")
    attrs, _, tensors = make("3d", "gelu", dtype)
    kernel = onednn_direct_linear(context("linear", attrs, tensors, {1, 2}, dynamic_batch=True))
    for batch in (1, 5, 2, 40):
        _, exact, tensors = make("3d", "gelu", dtype, batch=batch)
        got = run(kernel, tensors, {"batch": batch})
        assert got.shape[0] == batch
        assert rel_err(got, reference("linear", attrs, exact)) < (FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE)


def test_runs_only_at_the_level_it_was_measured_at(monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "0")  # (an AMD CPU's choice; below, an Intel CPU's)
    assert _runs_at.onednn_direct_float_linear("avx512_bf16") is None
    for level in ("avx2", "avx512", "avx512_vnni", "amx"):
        assert "avx512_bf16 only" in _runs_at.onednn_direct_float_linear(level)


def test_cannot_run_where_mkl_runs_float32_linear(monkeypatch):
    """There float32 runs on MKL and bf16 widens to it, so the factory would decline every layer: the rule says so
    (the oracle's check that every factory able to run takes some case failed on the AMX host's CPU)."""
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "1")
    assert "MKL runs float32 linear" in _runs_at.onednn_direct_float_linear("avx512_bf16")
    for dtype in ("float32", "bfloat16"):
        attrs, _, tensors = make("3d", "relu", dtype)
        assert onednn_direct_linear(context("linear", attrs, tensors, {1, 2}, isa="avx512_bf16")) is None


def test_declines_nan_safe_plans_and_non_constant_weights():
    attrs, _, tensors = make("3d", "relu", "float32" if takes("float32") else "bfloat16")
    ctx = context("linear", attrs, tensors, {1, 2})
    assert onednn_direct_linear(dataclasses.replace(ctx, nan_safe=True)) is None
    assert onednn_direct_linear(context("linear", attrs, tensors, {2})) is None
