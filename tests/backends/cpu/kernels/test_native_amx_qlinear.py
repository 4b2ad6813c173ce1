"""native_amx_qlinear: int8 linear on AMX tiles (int8_amx_gemm) up to AMX_MAX_ROWS rows, measured per layer against
our oneDNN int8 matmul (onednn_direct_qlinear), which runs more rows: both against QLinearOp.reference; the nodes it
declines; its switch."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import context, rel_err, run

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.kernels import linear, qlinear
from ipexconvert.backends.cpu.kernels._runs_at import native_amx_int8_linear
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.ir.ops._quant import quantize
from ipexconvert.ir.ops.qlinear import QLinearOp
from ipexconvert.quant.weights import quantize_weight

AMX = native_amx_int8_linear(selected_isa()) is None
pytestmark = pytest.mark.skipif(not AMX, reason=f"needs int8_amx_gemm here: {native_amx_int8_linear(selected_isa())}")

X_SCALE, X_ZP = 0.03, 131


def node(rows, n=64, k=128, post_ops=(), output="float32", seed=0):
    g = torch.Generator().manual_seed(seed)
    wq, ws = quantize_weight(torch.randn(n, k, generator=g) / k ** 0.5)
    xq = quantize(torch.randn(rows, k, generator=g), X_SCALE, X_ZP, "uint8")
    attrs = {"x_scale": X_SCALE, "x_zero_point": X_ZP, "post_ops": list(post_ops)}
    if output == "uint8":
        attrs.update(output_dtype="uint8", output_scale=0.05, output_zero_point=100)
    tensors = [xq, wq, ws, torch.randn(n, generator=g)]
    return context("qlinear", attrs, tensors, {1, 2, 3}, dynamic_batch=True), tensors, attrs


def want(tensors, attrs):
    op = QLinearOp()
    return op.reference(tensors, op.parse_attrs(attrs), {})


class CountingLib:
    """native_lib.raw with its int8_amx_gemm calls counted."""

    def __init__(self, raw):
        self.raw, self.calls = raw, 0

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def int8_amx_gemm(self, *args, **kwargs):
        self.calls += 1
        return self.raw.int8_amx_gemm(*args, **kwargs)


@pytest.mark.parametrize("post_ops, output", [((), "float32"), (({"kind": "gelu"},), "uint8"),
                                              (({"kind": "relu"},), "float32")], ids=["f32", "gelu-u8", "relu"])
def test_both_ways_match_the_reference_while_measuring_and_after(monkeypatch, post_ops, output):
    counting = CountingLib(native_lib.raw)
    monkeypatch.setattr(native_lib, "raw", counting)
    ctx, tensors, attrs = node(45, post_ops=post_ops, output=output)
    kernel = qlinear.native_amx_qlinear(ctx)
    assert kernel is not None and kernel.name == "native:int8_amx_gemm|onednn_direct:qlinear"
    expected = want(tensors, attrs)
    for _ in range(12):  # a block of each way, then the chosen one
        got = run(kernel, tensors, {})
        assert got.dtype == expected.dtype and got.shape == expected.shape
        if output == "uint8":
            assert (got.int() - expected.int()).abs().max() <= 1
        else:
            assert rel_err(got, expected) < 1e-3
    assert counting.calls >= 5  # the tiles' block ran


def test_more_rows_than_the_bound_run_onednn(monkeypatch):
    counting = CountingLib(native_lib.raw)
    monkeypatch.setattr(native_lib, "raw", counting)
    ctx, tensors, attrs = node(linear.AMX_MAX_ROWS + 1, n=32, k=64)
    got = run(qlinear.native_amx_qlinear(ctx), tensors, {})
    assert counting.calls == 0 and rel_err(got, want(tensors, attrs)) < 1e-3


@pytest.mark.parametrize("n, k", [(48, 128), (64, 96)])
def test_declines_sizes_the_tiles_do_not_take(n, k):
    ctx, _, _ = node(8, n=n, k=k)
    assert qlinear.native_amx_qlinear(ctx) is None
    assert qlinear.onednn_direct_qlinear(ctx) is not None  # which runs them instead


def test_switched_off(monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_AMX_GEMM", "0")
    assert "IPEXCONVERT_AMX_GEMM=0" in native_amx_int8_linear(selected_isa())


def test_always_runs_the_tiles_without_measuring(monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_AMX_GEMM", "always")
    monkeypatch.setattr(linear, "InSitu", lambda *a, **kw: pytest.fail("measured although told always"))
    counting = CountingLib(native_lib.raw)
    monkeypatch.setattr(native_lib, "raw", counting)
    ctx, tensors, attrs = node(40)
    kernel = qlinear.native_amx_qlinear(ctx)
    for _ in range(3):
        got = run(kernel, tensors, {})
    assert counting.calls == 3 and kernel.name == "native:int8_amx_gemm"
    assert rel_err(got, want(tensors, attrs)) < 1e-3
