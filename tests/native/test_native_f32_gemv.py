"""The f32_gemv kernel (a float32 linear layer for up to 4 decode rows, the weight read once) at every level this CPU
runs, against float64 matmul; threads and strided rows; its argument checks."""
from __future__ import annotations

import pytest
import torch

import native_ops as native

LEVELS = native.supported_levels() if native.available() else []
pytestmark = pytest.mark.skipif(not LEVELS, reason="needs the native build")

# m, n, k: k tails short of 64 and of 16, one channel, a Qwen2-0.5B down projection, 4 rows, many channels (run in
# ranges of at most 256 KiB of weights)
SHAPES = [(1, 1152, 896), (2, 37, 100), (3, 8, 16), (4, 96, 4864), (1, 5, 7), (4, 1, 1), (2, 3000, 896)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_matches_float64(level, m, n, k):
    torch.manual_seed(m * n + k)
    x, w, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    out = torch.empty(m, n)
    native.raw.f32_gemv(x, w, bias, out, level, 2)
    want = x.double() @ w.double().T + bias.double()
    # float32 sums of k products: within a few float32 units of the sum of magnitudes
    assert ((out.double() - want).abs() <= 1e-6 * (x.double().abs() @ w.double().abs().T) * k ** 0.5 + 1e-6).all()
    alone = torch.empty(m, n)
    native.raw.f32_gemv(x, w, bias, alone, level, 1)
    assert torch.equal(out, alone)  # every output summed in the same order whatever the threads


def test_no_bias_and_strided_rows_of_a_wider_tensor():
    x = torch.randn(3, 200)
    w = torch.randn(24, 96)
    out = torch.empty(3, 24)
    native.raw.f32_gemv(x[:, 50:146], w, None, out, None, 2)
    assert torch.allclose(out, x[:, 50:146] @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change, message", [
    (dict(x=torch.zeros(5, 16)), "takes at most 4"),
    (dict(x=torch.zeros(1, 15)), "must have k = 16 columns"),
    (dict(w=torch.zeros(8, 16).bfloat16()), "must be a float32 tensor"),
    (dict(w=torch.zeros(16, 8).T), "contiguous"),
    (dict(out=torch.empty(1, 7)), "must hold 1 rows of 8"),
    (dict(bias=torch.zeros(7)), "bias"),
])
def test_refuses_what_does_not_fit(change, message):
    args = dict(x=torch.zeros(1, 16), w=torch.zeros(8, 16), bias=None, out=torch.empty(1, 8))
    args.update(change)
    with pytest.raises(ValueError, match=message):
        native.raw.f32_gemv(args["x"], args["w"], args["bias"], args["out"], None, 1)


@pytest.mark.parametrize("factory", ["onednn_direct_linear", "torch_onednn_linear"])
def test_float32_linear_on_onednn_runs_it_for_decode_rows(factory, monkeypatch):
    """Where float32 linear runs on oneDNN (CPUs MKL does not run it on), up to 4 rows run f32_gemv, with the node's
    post-ops after it; more rows keep oneDNN."""
    from ipexconvert.backends.cpu.kernels import linear as linear_kernels
    from ipexconvert.ir import TensorSpec
    from ipexconvert.ir.opdef import get_op
    from ipexconvert.runtime.kernels import NodeContext

    calls = []
    real = native.raw.f32_gemv
    monkeypatch.setattr(native.raw, "f32_gemv", lambda *a: calls.append(tuple(a[0].shape)) or real(*a), raising=False)
    torch.manual_seed(0)
    w, b = torch.randn(20, 40), torch.randn(20)
    attrs = get_op("linear").parse_attrs({"post_ops": [{"kind": "gelu"}]})
    ctx = NodeContext(op="linear", attrs=attrs,
                      input_specs=(TensorSpec(dtype="float32", shape=["rows", 40]),
                                   TensorSpec(dtype="float32", shape=[20, 40]), TensorSpec(dtype="float32", shape=[20])),
                      output_specs=(TensorSpec(dtype="float32", shape=["rows", 20]),), constants=(None, w, b),
                      device="cpu", isa=native.selected_level())
    kernel = getattr(linear_kernels, factory)(ctx)
    if kernel is None:
        pytest.skip(f"{factory} does not run float32 linear here (MKL does on Intel CPUs; or not at this level)")
    for rows in (1, 4, 9):
        x = torch.randn(rows, 40)
        got = kernel.fn([x, w, b], {})
        want = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert calls == [(1, 40), (4, 40)]
