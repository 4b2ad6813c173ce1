"""torch_mkl:linear (float32) against the linear reference: static rows packed at load, dynamic rows packed
on the first call, other row counts through the unpacked fallback, post-ops in torch, and the
factory declining what it does not run."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import FP32_TOLERANCE, WrongResult, context, probe_with, reference, rel_err, run

from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels.linear import torch_mkl_linear

pytestmark = pytest.mark.skipif(probe.op_for("mkl._mkl_linear", "float32") is None,
                                reason="this torch build has no usable MKL packed GEMM")


@pytest.fixture(autouse=True)
def mkl_on_any_cpu(monkeypatch):
    """MKL runs float32 linear on Intel CPUs only; it computes the same elsewhere, so test it everywhere."""
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "1")


def make(lead: tuple[int, ...], k: int = 33, n: int = 17, bias: bool = True, post_ops: list | None = None):
    g = torch.Generator().manual_seed(k * n)
    weight = torch.randn(n, k, generator=g) / k ** 0.5
    b = torch.randn(n, generator=g) if bias else None
    x = torch.randn(*lead, k, generator=torch.Generator().manual_seed(sum(lead)))
    return {"post_ops": post_ops or []}, [x, weight, b]


@pytest.mark.parametrize("lead", [(5,), (2, 3), (1, 1)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("post_ops", [[], [{"kind": "gelu"}], [{"kind": "relu"}, {"kind": "tanh"}]])
def test_static_rows_match_reference(lead, bias, post_ops):
    attrs, tensors = make(lead, bias=bias, post_ops=post_ops)
    kernel = torch_mkl_linear(context("linear", attrs, tensors, {1, 2}))
    assert kernel is not None and kernel.name == "torch_mkl:linear"
    assert kernel.consumed_inputs == ({1, 2} if bias else {1})
    got = run(kernel, tensors, {})
    assert got.shape == (*lead, 17) and got.dtype == torch.float32
    assert rel_err(got, reference("linear", attrs, tensors)) < FP32_TOLERANCE


def test_dynamic_rows_pack_on_first_call_and_stay_correct_for_others():
    attrs, tensors = make((4, 3), post_ops=[{"kind": "gelu"}])
    kernel = torch_mkl_linear(context("linear", attrs, tensors, {1, 2}, dynamic_batch=True))
    for batch in (4, 1, 7, 4):  # packed for 12 rows; 3 and 21 rows take the unpacked GEMM
        _, batch_tensors = make((batch, 3), post_ops=[{"kind": "gelu"}])
        got = run(kernel, batch_tensors, {"batch": batch})
        assert got.shape == (batch, 3, 17)
        assert rel_err(got, reference("linear", attrs, batch_tensors)) < FP32_TOLERANCE


def test_declines_what_it_does_not_run():
    attrs, tensors = make((2, 3))
    assert torch_mkl_linear(context("linear", attrs, tensors, {2})) is None  # weight not a constant
    bf16 = [t.bfloat16() for t in tensors]
    assert torch_mkl_linear(context("linear", attrs, bf16, {1, 2})) is None  # bfloat16 is oneDNN's
    assert torch_mkl_linear(context("linear", attrs, [tensors[0][0, 0], *tensors[1:]], {1, 2})) is None  # rank 1 input


def test_failed_probe_sends_the_node_to_the_reference(monkeypatch):
    probe.reset()
    try:
        messages = probe_with(monkeypatch, {"mkl._mkl_linear": WrongResult})
        assert len(messages) == 1 and "mkl._mkl_linear" in messages[0]
        attrs, tensors = make((2, 3))
        assert torch_mkl_linear(context("linear", attrs, tensors, {1, 2})) is None
    finally:
        monkeypatch.undo()
        probe.reset()
