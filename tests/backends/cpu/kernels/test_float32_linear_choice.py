"""Which library runs float32 linear: MKL's packed sgemm on Intel CPUs, oneDNN on others (MKL takes
slower code paths there), IPEXCONVERT_MKL_FP32 overriding; and oneDNN's float32 kernel against the
reference wherever it is chosen."""
from __future__ import annotations

import pytest
from torch_onednn_helpers import FP32_TOLERANCE, context, reference, rel_err, run

from ipexconvert.backends.cpu import isa as cpu
from ipexconvert.backends.cpu.kernels import _torch_onednn as _common
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels.linear import torch_mkl_linear
from ipexconvert.backends.cpu.kernels.linear import torch_onednn_linear
from test_torch_mkl_linear import make


@pytest.fixture
def vendor(monkeypatch):
    monkeypatch.delenv("IPEXCONVERT_MKL_FP32", raising=False)

    def set_vendor(name: str) -> None:
        monkeypatch.setattr(_common, "cpu_vendor", lambda: name)
    return set_vendor


def test_vendor_picks_the_library(vendor, monkeypatch):
    vendor("GenuineIntel")
    assert _common.mkl_runs_float32_linear()
    vendor("AuthenticAMD")
    assert not _common.mkl_runs_float32_linear()
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "1")
    assert _common.mkl_runs_float32_linear()
    vendor("GenuineIntel")
    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "0")
    assert not _common.mkl_runs_float32_linear()


def test_cpu_vendor_reads_cpuinfo():
    with open("/proc/cpuinfo") as f:
        want = next((line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")), "unknown")
    assert cpu.cpu_vendor() == want


@pytest.mark.skipif(probe.op_for("mkldnn._linear_pointwise", "float32") is None
                    or probe.op_for("mkl._mkl_linear", "float32") is None,
                    reason="this torch build lacks oneDNN's or MKL's linear")
@pytest.mark.parametrize("post_ops", [[], [{"kind": "gelu"}]])
def test_exactly_one_factory_takes_a_float32_linear(vendor, post_ops):
    attrs, tensors = make((2, 3), post_ops=post_ops)
    level = cpu.selected_isa()
    for name, factory, want in (("GenuineIntel", torch_mkl_linear, "torch_mkl:linear"),
                                ("AuthenticAMD", torch_onednn_linear, "torch_onednn:linear")):
        vendor(name)
        kernels = [k for k in (torch_mkl_linear(context("linear", attrs, tensors, {1, 2})),
                               torch_onednn_linear(context("linear", attrs, tensors, {1, 2}))) if k is not None]
        if factory.runs_at(level) is not None:  # generic: torch's oneDNN needs avx2, none takes it (the reference)
            assert kernels == [], (name, level, factory.runs_at(level))
            continue
        assert [k.name for k in kernels] == [want]
        got = run(kernels[0], tensors, {})
        assert rel_err(got, reference("linear", attrs, tensors)) < FP32_TOLERANCE
