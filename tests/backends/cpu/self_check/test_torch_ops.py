"""The start-up probe: a missing or wrong private op makes its factory decline (the reference runs),
with one warning line naming the op."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch_onednn_helpers import torch_operators_only  # noqa: F401  (autouse)
from torch_onednn_helpers import FP32_TOLERANCE, WrongResult, context, probe_with, reference, rel_err, run

from ipexconvert.backends.cpu.isa import ISA_LEVELS, selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.runtime.kernels import resolve_kernel


CONV = "mkldnn._convolution_pointwise"
LINEAR = "mkldnn._linear_pointwise"


@pytest.fixture(autouse=True)
def fresh_probe():
    """Each test probes from scratch, and leaves real results behind for the other tests."""
    probe.reset()
    yield
    probe.reset()


def conv_node():
    g = torch.Generator().manual_seed(0)
    tensors = [torch.randn(2, 4, 9, 9, generator=g), torch.randn(6, 4, 3, 3, generator=g), torch.randn(6, generator=g)]
    attrs = {"padding": [1, 1], "post_ops": [{"kind": "relu"}]}
    return attrs, tensors


def test_all_ops_pass_here():
    report = probe.probe_report()
    assert report["onednn_available"]
    for name, result in report["ops"].items():
        assert result["found"] and all(result["passed"].values()) and result["error"] is None, name
        assert bool(result["passed"]) != bool(result["not_used"]), name  # checked, or not used by decision
        if result["not_used"]:
            assert name.startswith("onednn.") and ISA_LEVELS.index(selected_isa()) < ISA_LEVELS.index("avx512_vnni")
    assert "float32" in report["dtypes_checked"]


def test_missing_op_falls_back_with_one_warning(monkeypatch):
    caught = probe_with(monkeypatch, {CONV: None})
    assert len(caught) == 1 and CONV in caught[0]
    assert not probe.probe_report()["ops"][CONV]["found"]

    attrs, tensors = conv_node()
    ctx = context("conv2d", attrs, tensors, {1, 2})
    kernel = resolve_kernel(ctx)
    assert kernel.name == "reference:conv2d" and not kernel.consumed_inputs
    assert rel_err(run(kernel, tensors, {}), reference("conv2d", attrs, tensors)) < FP32_TOLERANCE
    with warnings.catch_warnings(record=True) as again:  # no more warnings at later loads
        warnings.simplefilter("always")
        resolve_kernel(ctx)
    assert not again


def test_wrong_numbers_fall_back(monkeypatch):
    caught = probe_with(monkeypatch, {LINEAR: WrongResult})
    assert len(caught) == 1 and LINEAR in caught[0] and "off" in caught[0]
    assert probe.op_for(LINEAR, "float32") is None
    assert probe.op_for(CONV, "float32") is not None  # the others stay usable


def test_changed_schema_falls_back(monkeypatch):
    class Renamed:
        def __init__(self, op):
            self._schema = torch._C.parse_schema("mkldnn::_convolution_pointwise(Tensor X, Tensor W) -> Tensor")

    caught = probe_with(monkeypatch, {CONV: Renamed})
    assert len(caught) == 1 and "schema" in caught[0]
    attrs, tensors = conv_node()
    assert resolve_kernel(context("conv2d", attrs, tensors, {1, 2})).name == "reference:conv2d"
