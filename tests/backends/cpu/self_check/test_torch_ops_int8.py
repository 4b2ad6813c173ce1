"""The start-up probe of the oneDNN int8 ops (dtype key "int8"): all pass here and show in
probe_report(); a missing or wrong one makes the int8 factories that need it decline (the
reference runs) with one warning, and a broken .binary op only moves the residual add to torch."""
from __future__ import annotations


import pytest
from torch_onednn_helpers import torch_operators_only  # noqa: F401  (autouse)
from torch_onednn_helpers import context, probe_with, run
from test_torch_onednn_qconv2d import make as make_conv
from test_torch_onednn_qconv2d import reference as conv_reference
from test_torch_onednn_qlinear import check
from test_torch_onednn_qlinear import make as make_linear

from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.runtime.kernels import resolve_kernel


INT8_OPS = [name for name in probe.EXPECTED_ARGS if name.startswith("onednn.")]
QLINEAR, QCONV_BINARY = "onednn.qlinear_pointwise", "onednn.qconv2d_pointwise.binary"
needs_vnni = pytest.mark.skipif(not int8_allowed(selected_isa()), reason="oneDNN int8 kernels need avx512_vnni")


@pytest.fixture(autouse=True)
def fresh_probe():
    """Each test probes from scratch, and leaves real results behind for the other tests."""
    probe.reset()
    yield
    probe.reset()


class WrongResult:
    """Stands in for an op whose schema is right but whose numbers are off."""

    def __init__(self, op):
        self._op, self._schema = op, op._schema

    def __call__(self, *args):
        return self._op(*args).float() * 1.5


def kernel_names(tensors_linear, tensors_conv) -> tuple[str, str]:
    (la, lt), (ca, ct) = tensors_linear, tensors_conv
    return (resolve_kernel(context("qlinear", la, lt, {1, 2, 3})).name,
            resolve_kernel(context("qconv2d", ca, ct, {1, 2, 3})).name)


@needs_vnni
def test_int8_ops_pass_here():
    ops = probe.probe_report()["ops"]
    assert len(INT8_OPS) == 5
    for name in INT8_OPS:
        assert ops[name]["found"] and ops[name]["passed"] == {"int8": True} and ops[name]["error"] is None, name


@pytest.mark.skipif(int8_allowed(selected_isa()), reason="this CPU runs oneDNN int8 (avx512_vnni and up)")
def test_below_vnni_int8_ops_are_not_used_and_not_warned_about():
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ops = probe.probe_report()["ops"]
    assert not [w for w in caught if "oneDNN" in str(w.message)]
    for name in INT8_OPS:
        assert ops[name]["not_used"] == probe.INT8_NOT_USED and ops[name]["passed"] == {}, name
    linear, conv = make_linear("3d", "float32", "relu"), make_conv(1, "float32", "relu")
    assert kernel_names(linear, conv)[0] != "torch_onednn:qlinear" and kernel_names(linear, conv)[1] != "torch_onednn:qconv2d"


@needs_vnni
def test_wrong_qlinear_falls_back_with_one_warning(monkeypatch):
    caught = probe_with(monkeypatch, {QLINEAR: WrongResult})
    assert len(caught) == 1 and QLINEAR in caught[0] and "off" in caught[0]
    assert probe.probe_report()["ops"][QLINEAR]["passed"] == {"int8": False}
    linear, conv = make_linear("3d", "float32", "relu"), make_conv(1, "float32", "relu")
    assert kernel_names(linear, conv) == ("reference:qlinear", "torch_onednn:qconv2d")  # the others stay usable


@needs_vnni
def test_missing_qconv_prepack_falls_back_with_one_warning(monkeypatch):
    caught = probe_with(monkeypatch, {"onednn.qconv_prepack": None})
    assert len(caught) == 1 and "onednn.qconv_prepack" in caught[0] and "not found" in caught[0]
    linear, conv = make_linear("3d", "float32", "relu"), make_conv(1, "float32", "relu")
    assert kernel_names(linear, conv) == ("torch_onednn:qlinear", "reference:qconv2d")


@needs_vnni
def test_wrong_qconv_binary_moves_the_add_to_torch(monkeypatch):
    caught = probe_with(monkeypatch, {QCONV_BINARY: WrongResult})
    assert len(caught) == 1 and QCONV_BINARY in caught[0] and caught[0].count("onednn.") == 1
    attrs, tensors = make_conv(1, "float32", "add-relu")
    kernel = resolve_kernel(context("qconv2d", attrs, tensors, {1, 2, 3}))
    assert kernel.name == "torch_onednn:qconv2d"  # the plain op, with add and relu after it in torch
    check(run(kernel, tensors, {}), conv_reference(attrs, tensors), attrs)
