"""torch_onednn:linear against the linear reference: odd sizes, rank 2 and 3 inputs, bias or none, every
post-op combination, one kernel at two batch sizes. The registered factory takes bfloat16 only
(float32 stays on MKL through the reference, measured faster); build_linear_kernel is checked
in float32 too, so that path stays correct should the policy change."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import (BF16_TOLERANCE, FP32_TOLERANCE, context, reference, rel_err, run,
                                  runs_at_selected_level)

from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import isa_allows
from ipexconvert.backends.cpu.kernels import linear as linear_kernels
from ipexconvert.backends.cpu.kernels._torch_onednn import mkl_runs_float32_linear
from ipexconvert.backends.cpu.kernels._runs_at import torch_onednn_float
from ipexconvert.backends.cpu.kernels.linear import WIDE_FROM_ROWS, build_linear_kernel, torch_onednn_linear

# build_linear_kernel runs torch's oneDNN linear whatever the MKL policy: it needs what every torch oneDNN kernel
# does (avx2 up), not the registered factory's policy (torch_onednn_linear.runs_at). Below avx2
# (IPEXCONVERT_MAX_ISA=generic) it declines every node (test_declines), and the tests that run its kernel skip.
RUNS_HERE = runs_at_selected_level("torch's oneDNN linear (build_linear_kernel)", torch_onednn_float)
HAS_BF16 = "bfloat16" in probe.checked_dtypes() and isa_allows(selected_isa(), "bfloat16")
DTYPES = ["float32", pytest.param("bfloat16", marks=pytest.mark.skipif(not HAS_BF16, reason="no native bf16"))]

# (leading dims of x, in features, out features, bias)
SHAPES = {
    "2d": ((5,), 24, 17, True),
    "3d": ((2, 3), 24, 17, True),
    "3d-no-bias": ((3, 7), 33, 9, False),
}
POST_OPS = {
    "none": [],
    "relu": [{"kind": "relu"}],
    "gelu": [{"kind": "gelu"}],
    "gelu_tanh": [{"kind": "gelu_tanh"}],
    "silu": [{"kind": "silu"}],
    "sigmoid": [{"kind": "sigmoid"}],
    "tanh": [{"kind": "tanh"}],
    "add": [{"kind": "add", "operand": 3}],
    "mul": [{"kind": "mul", "operand": 3}],
    "add-relu": [{"kind": "add", "operand": 3}, {"kind": "relu"}],
    "gelu-add": [{"kind": "gelu"}, {"kind": "add", "operand": 3}],
    "add-broadcast": [{"kind": "add", "operand": 3}],  # operand [out]: not fusable, runs in torch
}


def make(shape: str, post_ops: str, dtype: str, batch: int | None = None):
    lead, k, n, has_bias = SHAPES[shape]
    if batch is not None:
        lead = (batch, *lead[1:])
    g = torch.Generator().manual_seed(sum(map(ord, shape)))
    weight = torch.randn(n, k, generator=g) / k ** 0.5
    bias = torch.randn(n, generator=g) if has_bias else None
    x = torch.randn(*lead, k, generator=g)  # drawn after the weights: they stay the same at any batch
    tensors = [x, weight, bias]
    ops = POST_OPS[post_ops]
    if any(p.get("operand") is not None for p in ops):
        tensors.append(torch.randn((n,) if post_ops == "add-broadcast" else (*lead, n), generator=g))
    attrs = {"post_ops": ops}
    return attrs, tensors, [None if t is None else t.to(getattr(torch, dtype)) for t in tensors]


@RUNS_HERE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("post_ops", list(POST_OPS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_matches_reference(shape, post_ops, dtype):
    attrs, exact, tensors = make(shape, post_ops, dtype)
    kernel = build_linear_kernel(context("linear", attrs, tensors, {1, 2}))
    assert kernel is not None and kernel.name == "torch_onednn:linear"
    assert kernel.consumed_inputs == ({1, 2} if tensors[2] is not None else {1})
    got = run(kernel, tensors, {})
    assert got.dtype == tensors[0].dtype
    tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
    assert rel_err(got, reference("linear", attrs, exact)) < tolerance


@RUNS_HERE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("post_ops", ["gelu", "add"])
def test_dynamic_batch_one_kernel(post_ops, dtype):
    attrs, _, tensors = make("3d", post_ops, dtype)
    kernel = build_linear_kernel(context("linear", attrs, tensors, {1, 2}, dynamic_batch=True))
    for batch in (1, 5):
        _, exact, tensors = make("3d", post_ops, dtype, batch=batch)
        got = run(kernel, tensors, {"batch": batch})
        assert got.shape[0] == batch
        tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
        assert rel_err(got, reference("linear", attrs, exact)) < tolerance


def test_registered_factory_takes_bf16_and_float32_only_where_mkl_does_not(monkeypatch):
    attrs, _, fp32 = make("3d", "gelu", "float32")
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "1")
    assert torch_onednn_linear(context("linear", attrs, fp32, {1, 2})) is None
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "0")
    level = selected_isa()
    why = torch_onednn_linear.runs_at(level)
    if why is not None:  # generic: below avx2 the factory declines every node (test_declines)
        pytest.skip(f"torch_onednn_linear cannot run at the selected ISA level {level}: {why}")
    assert torch_onednn_linear(context("linear", attrs, fp32, {1, 2})) is not None
    if HAS_BF16:
        bf16 = [t.bfloat16() for t in fp32]
        assert torch_onednn_linear(context("linear", attrs, bf16, {1, 2})) is not None


def test_declines():
    attrs, _, tensors = make("3d", "none", "float32")
    assert build_linear_kernel(context("linear", attrs, tensors, {2})) is None  # weight not a constant
    mixed = [tensors[0], tensors[1].bfloat16(), tensors[2]]
    assert build_linear_kernel(context("linear", attrs, mixed, {1, 2})) is None  # dtypes disagree
    assert build_linear_kernel(context("linear", attrs, tensors, {1, 2}, isa="generic")) is None


def test_widening_is_for_bf16_at_the_avx512_bf16_level_with_mkl():
    assert not linear_kernels.widens_many_rows("amx", "bfloat16")  # AMX tiles: bf16 is faster than float32
    assert not linear_kernels.widens_many_rows("avx512_bf16", "float32")
    assert linear_kernels.widens_many_rows("avx512_bf16", "bfloat16") == mkl_runs_float32_linear()


@pytest.mark.skipif(not HAS_BF16, reason="no native bf16")
@pytest.mark.parametrize("post_ops", ["none", "gelu", "add-relu", "gelu-add", "add-broadcast"])
def test_bf16_many_rows_widen_to_float32(monkeypatch, post_ops):
    """At WIDE_FROM_ROWS rows and more the kernel computes in float32 (MKL) and rounds once to bf16, post-ops
    after; fewer rows stay on oneDNN's bf16 path. Both match the bf16 reference."""
    monkeypatch.setattr(linear_kernels, "widens_many_rows", lambda isa, dtype: True)
    real, widened_calls = torch.nn.functional.linear, []

    def spy(x, *args, **kwargs):
        widened_calls.append(x.dtype)
        return real(x, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "linear", spy)
    attrs, _, tensors = make("3d", post_ops, "bfloat16")
    kernel = build_linear_kernel(context("linear", attrs, tensors, {1, 2}, dynamic_batch=True))
    for batch in (2, WIDE_FROM_ROWS // 3 + 1):  # "3d" has 3 rows a batch element: 6 rows, then just past the bound
        _, exact, tensors = make("3d", post_ops, "bfloat16", batch=batch)
        widened_calls.clear()
        got = run(kernel, tensors, {"batch": batch})
        assert got.dtype == torch.bfloat16 and got.shape[0] == batch
        assert widened_calls == ([torch.float32] if batch * 3 >= WIDE_FROM_ROWS else [])
        assert rel_err(got, reference("linear", attrs, exact)) < BF16_TOLERANCE


@pytest.mark.skipif(not HAS_BF16, reason="no native bf16")
@pytest.mark.parametrize("post_ops", ["none", "relu", "add"])
def test_bf16_decode_rows_run_the_native_gemv_where_nothing_widens(monkeypatch, post_ops):
    """Where bf16 does not widen (AMX), up to GEMV_ROWS rows (a decode step, a classifier's one row) run our
    bf16_gemv on the plain weight, post-ops in torch after it; more rows stay on oneDNN. Both match the reference."""
    from ipexconvert.backends.cpu import native_lib
    if not native_lib.available():
        pytest.skip("the native library is not built")
    monkeypatch.setattr(linear_kernels, "widens_many_rows", lambda isa, dtype: False)
    calls, real = [], native_lib.raw

    class Spy:
        def __getattr__(self, name):
            fn = getattr(real, name)
            return (lambda *args, **kwargs: (calls.append(name), fn(*args, **kwargs))[1]) if name == "bf16_gemv" else fn

    monkeypatch.setattr(native_lib, "raw", Spy())
    attrs, _, tensors = make("2d", post_ops, "bfloat16")
    kernel = build_linear_kernel(context("linear", attrs, tensors, {1, 2}, dynamic_batch=True))
    for batch in (1, linear_kernels.GEMV_ROWS, linear_kernels.GEMV_ROWS + 1):
        _, exact, tensors = make("2d", post_ops, "bfloat16", batch=batch)
        calls.clear()
        got = run(kernel, tensors, {"batch": batch})
        assert got.dtype == torch.bfloat16 and got.shape == (batch, 17)
        assert calls == (["bf16_gemv"] if batch <= linear_kernels.GEMV_ROWS else [])
        assert rel_err(got, reference("linear", attrs, exact)) < BF16_TOLERANCE
