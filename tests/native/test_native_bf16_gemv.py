"""The bf16_gemv kernel (a bf16 linear layer for up to 4 rows, float32 sums, rounded once) and bf16_gemm (any number
of rows, on widened panels) at every level this CPU runs, against float64 matmul; their argument checks; and the
bf16 linear kernels' use of them (decode rows where bf16 widens; every row count below avx512_bf16)."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.backends.cpu import compute_precision
from ipexconvert.backends.cpu.kernels import linear as linear_kernels
from ipexconvert.ir import TensorSpec
from ipexconvert.ir.opdef import get_op
from ipexconvert.runtime.kernels import NodeContext

LEVELS = native.supported_levels() if native.available() else []
pytestmark = pytest.mark.skipif(not LEVELS, reason="needs the native build")

SHAPES = [(1, 1152, 896), (2, 37, 100), (3, 8, 16), (4, 96, 4864), (1, 5, 7), (4, 1, 1),
          (2, 3000, 896)]  # m, n, k (the last: 5 MiB of weights, run in ranges of at most 256 KiB)


def reference(x, w, bias):
    out = x.double().reshape(-1, x.shape[-1]) @ w.double().T
    return out + bias.double() if bias is not None else out


# bf16_gemm's m, n, k: partial row tiles (AVX-512 14 rows, AVX2 6), channels past a 16/32 panel, k tails short of 16
# and of a 256 k-panel, one row chunk and several (512 rows each at most), a Qwen2-0.5B down projection, and
# groups of tasks that span two row chunks (1100 rows: three chunks of 378, groups of 43 panels)
GEMM_SHAPES = [(5, 17, 40), (37, 100, 333), (300, 70, 64), (513, 33, 260), (64, 896, 4864), (6, 1, 1),
               (1100, 1100, 300)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kernel, m, n, k", [("bf16_gemv", *s) for s in SHAPES] + [("bf16_gemm", *s) for s in GEMM_SHAPES])
def test_matches_float64_within_one_bf16_rounding(level, kernel, m, n, k):
    torch.manual_seed(m * n + k)
    x, w, bias = torch.randn(m, k).bfloat16(), torch.randn(n, k).bfloat16(), torch.randn(n)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    getattr(native.raw, kernel)(x, w, bias, out, level, 2)
    want = reference(x, w, bias)
    # float32 sums, then one rounding to bf16: within half a bf16 unit (2^-8 relative) plus the sums' own error
    assert ((out.double() - want).abs() <= want.abs() * 2.0 ** -8 + 1e-4 * (k ** 0.5)).all()
    alone = torch.empty(m, n, dtype=torch.bfloat16)
    getattr(native.raw, kernel)(x, w, bias, alone, level, 1)
    assert torch.equal(out, alone)  # every output summed in the same order whatever the threads


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("side_by_side", [1, 8])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_both_weight_read_orders_match_float64(level, side_by_side, m, n, k):
    """bf16_gemv reads weight rows side by side (8: Intel's default) or one at a time (1: elsewhere); whichever this
    CPU's vendor picks, the other one must be right too (CI runs one vendor)."""
    torch.manual_seed(m * n + k + side_by_side)
    x, w, bias = torch.randn(m, k).bfloat16(), torch.randn(n, k).bfloat16(), torch.randn(n)
    out, alone = torch.empty(m, n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    native.raw.bf16_gemv(x, w, bias, out, level, 2, side_by_side)
    want = reference(x, w, bias)
    assert ((out.double() - want).abs() <= want.abs() * 2.0 ** -8 + 1e-4 * (k ** 0.5)).all()
    native.raw.bf16_gemv(x, w, bias, alone, level, 1, side_by_side)
    assert torch.equal(out, alone)


def test_weight_read_order_is_1_or_8():
    x, w, out = torch.zeros(1, 16).bfloat16(), torch.zeros(4, 16).bfloat16(), torch.empty(1, 4, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="side_by_side must be 1 or 8"):
        native.raw.bf16_gemv(x, w, None, out, None, 1, 4)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kernel", ["bf16_gemv", "bf16_gemm"])
def test_rounds_sums_to_nearest_even_keeps_subnormals_and_nan(level, kernel):
    """The float32 sum is rounded to bf16 once, to nearest with ties to even (1 + 2^-8 is a tie between 1 and
    1 + 2^-7: it goes to 1; 1 + 3 * 2^-8 goes up to 1 + 2^-6), NaN stays NaN, and subnormals are kept (at every
    level: seen on the AMX host's avx512_bf16 and amx levels too)."""
    rows = [[1.0, 2.0 ** -8], [1.0, 3 * 2.0 ** -8], [2.0 ** -130, 0.0], [-1.0, float("nan")]] * 4
    if kernel == "bf16_gemv":
        rows = rows[:4]
    x = torch.tensor(rows).bfloat16()
    w = torch.ones(40, 2).bfloat16()  # 40 channels: a whole 32-channel panel and a partial one
    out = torch.empty(len(rows), 40, dtype=torch.bfloat16)
    getattr(native.raw, kernel)(x, w, None, out, level, 1)
    want = torch.tensor([1.0, 1.0 + 2.0 ** -6, 2.0 ** -130, float("nan")] * (len(rows) // 4)).bfloat16()
    assert torch.equal(out[want == want], want[want == want, None].expand(-1, 40))
    assert torch.isnan(out[3::4]).all()


@pytest.mark.parametrize("kernel", ["bf16_gemv", "bf16_gemm"])
def test_strided_rows_no_bias_and_n_dimensional_x(kernel):
    call = getattr(native.raw, kernel)
    x = torch.randn(3, 64).bfloat16()
    w = torch.randn(24, 48).bfloat16()
    out = torch.empty(3, 24, dtype=torch.bfloat16)
    call(x[:, 8:56], w, None, out, None, 2)  # rows 64 apart
    want = reference(x[:, 8:56], w, None)
    assert ((out.double() - want).abs() <= want.abs() * 2.0 ** -8 + 1e-3).all()
    out3 = torch.empty(1, 2, 24, dtype=torch.bfloat16)
    call(x[:2, 8:56].contiguous().view(1, 2, 48), w, None, out3, None, 2)
    assert torch.equal(out3.view(2, 24), out[:2])


@pytest.mark.parametrize("kernel", ["bf16_gemv", "bf16_gemm"])
@pytest.mark.parametrize("change, message", [
    (dict(x=torch.zeros(2, 16)), "x must be a bfloat16"),
    (dict(w=torch.zeros(8, 16)), "w must be a bfloat16"),
    (dict(x=torch.zeros(2, 15, dtype=torch.bfloat16)), "k = 16 columns"),
    (dict(out=torch.empty(2, 7, dtype=torch.bfloat16)), "must hold 2 rows of 8"),
    (dict(bias=torch.zeros(7)), "bias"),
    (dict(bias=torch.zeros(8, dtype=torch.bfloat16)), "float32"),
    (dict(w=torch.zeros(16, 8, dtype=torch.bfloat16).T), "contiguous"),
    (dict(x=torch.zeros(1, 32, dtype=torch.bfloat16)[:, ::2], out=torch.empty(1, 8, dtype=torch.bfloat16)),
     "contiguous rows"),  # one row whose values are not side by side
])
def test_bad_arguments_are_clear_errors(kernel, change, message):
    args = dict(x=torch.zeros(2, 16, dtype=torch.bfloat16), w=torch.zeros(8, 16, dtype=torch.bfloat16), bias=None,
                out=torch.empty(2, 8, dtype=torch.bfloat16), max_isa=None, threads=1)
    args.update(change)
    with pytest.raises(ValueError, match=message):
        getattr(native.raw, kernel)(*args.values())


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("silu, combine", [(True, None), (False, "add"), (False, "mul"), (True, "mul")])
@pytest.mark.parametrize("m, n, k", [(37, 100, 333), (513, 33, 260)])
def test_gemm_epilogue_before_its_one_rounding(level, silu, combine, m, n, k):
    """bf16_gemm's epilogue (a gate's SiLU, a residual add, SwiGLU's mul by the gate) on the float32 sums, then one
    rounding: within half a bf16 unit of float64's, the same whatever the threads."""
    torch.manual_seed(m + n + k)
    x, w, bias = (torch.randn(m, k) * 0.1).bfloat16(), torch.randn(n, k).bfloat16(), torch.randn(n)
    operand = torch.randn(m, n).bfloat16() if combine else None
    out, alone = torch.empty(m, n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    native.raw.bf16_gemm(x, w, bias, out, level, 2, silu=silu, operand=operand, combine=combine or "add")
    want = reference(x, w, bias)
    if silu:
        want = want * torch.sigmoid(want)
    if combine:
        want = want + operand.double() if combine == "add" else want * operand.double()
    scale = operand.double().abs() if combine == "mul" else 1.0
    assert ((out.double() - want).abs() <= want.abs() * 2.0 ** -8 + 1e-4 * (k ** 0.5) * scale + 1e-6).all()
    native.raw.bf16_gemm(x, w, bias, alone, level, 1, silu=silu, operand=operand, combine=combine or "add")
    assert torch.equal(out, alone)


@pytest.mark.parametrize("operand, combine, message", [
    (torch.zeros(2, 8), "add", "operand must be a contiguous bfloat16"),
    (torch.zeros(2, 7, dtype=torch.bfloat16), "add", "2 rows of 8"),
    (torch.zeros(8, 2, dtype=torch.bfloat16).T, "add", "contiguous"),
    (torch.zeros(2, 8, dtype=torch.bfloat16), "sub", "combine must be 'add' or 'mul'"),
])
def test_gemm_epilogue_bad_operands_are_clear_errors(operand, combine, message):
    x, w = torch.zeros(2, 16, dtype=torch.bfloat16), torch.zeros(8, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        native.raw.bf16_gemm(x, w, None, torch.empty(2, 8, dtype=torch.bfloat16), None, 1, operand=operand,
                             combine=combine)
    out = torch.empty(2, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="must not share memory with out"):
        native.raw.bf16_gemm(x, w, None, out, None, 1, operand=out)


def test_gemv_takes_at_most_4_rows_gemm_any():
    x, w = torch.ones(5, 16, dtype=torch.bfloat16), torch.ones(8, 16, dtype=torch.bfloat16)
    out = torch.empty(5, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="at most 4"):
        native.raw.bf16_gemv(x, w, None, out, None, 1)
    native.raw.bf16_gemm(x, w, None, out, None, 1)
    assert torch.equal(out, torch.full((5, 8), 16.0, dtype=torch.bfloat16))


def test_bf16_linear_runs_it_for_decode_rows_where_bf16_widens(monkeypatch):
    """Where bf16 linear widens many rows to float32 (no bf16 arithmetic faster than float32), up to 4 rows run
    bf16_gemv, with the node's post-ops after it; more rows keep the other paths."""
    monkeypatch.setattr(linear_kernels, "widens_many_rows", lambda isa, dtype: True)
    calls = []
    real = native.raw.bf16_gemv
    monkeypatch.setattr(native.raw, "bf16_gemv", lambda *a: calls.append(a[0].shape) or real(*a), raising=False)
    torch.manual_seed(0)
    w, b = torch.randn(20, 40).bfloat16(), torch.randn(20).bfloat16()
    attrs = get_op("linear").parse_attrs({"post_ops": [{"kind": "gelu"}]})
    ctx = NodeContext(op="linear", attrs=attrs,
                      input_specs=(TensorSpec(dtype="bfloat16", shape=["rows", 40]), TensorSpec(dtype="bfloat16", shape=[20, 40]),
                                   TensorSpec(dtype="bfloat16", shape=[20])),
                      output_specs=(TensorSpec(dtype="bfloat16", shape=["rows", 20]),), constants=(None, w, b),
                      device="cpu", isa=native.selected_level())
    kernel = linear_kernels.torch_onednn_linear(ctx)
    if kernel is None:
        pytest.skip("bf16 linear through oneDNN is not available at this level")
    for rows in (1, 4, 9):
        x = torch.randn(rows, 40).bfloat16()
        got = kernel.fn([x, w, b], {})
        want = torch.nn.functional.gelu(torch.nn.functional.linear(x.float(), w.float(), b.float()))
        assert (got.float() - want).abs().max() <= 0.02 * want.abs().max() + 0.02
    assert calls == [(1, 40), (4, 40)]


@pytest.mark.parametrize("level", [lv for lv in LEVELS if compute_precision.bf16_compute_dtype(lv) == "float32"])
def test_bf16_storage_linear_below_bf16_arithmetic(level, monkeypatch):
    """Below avx512_bf16 (a decoder keeps bf16 there) bf16 linear runs bf16_gemv for up to 4 rows and bf16_gemm for
    more, on the plain bf16 weight, with the node's post-ops after it; at bf16-arithmetic levels it declines."""
    calls = []
    for name in ("bf16_gemv", "bf16_gemm"):
        real = getattr(native.raw, name)
        monkeypatch.setattr(native.raw, name, lambda *a, name=name, real=real, **kw:
                            calls.append((name, a[0].shape)) or real(*a, **kw), raising=False)
    torch.manual_seed(0)
    w, b = torch.randn(20, 40).bfloat16(), torch.randn(20).bfloat16()
    attrs = get_op("linear").parse_attrs({"post_ops": [{"kind": "gelu"}]})

    def context(isa):
        return NodeContext(op="linear", attrs=attrs,
                           input_specs=(TensorSpec(dtype="bfloat16", shape=[1, "rows", 40]),
                                        TensorSpec(dtype="bfloat16", shape=[20, 40]), TensorSpec(dtype="bfloat16", shape=[20])),
                           output_specs=(TensorSpec(dtype="bfloat16", shape=[1, "rows", 20]),), constants=(None, w, b),
                           device="cpu", isa=isa)

    assert linear_kernels.bf16_storage_linear(context("avx512_bf16")) is None
    kernel = linear_kernels.bf16_storage_linear(context(level))
    assert kernel is not None and kernel.name == "native:bf16_storage_linear"
    for rows in (1, 4, 9):
        x = torch.randn(1, rows, 40).bfloat16()
        got = kernel.fn([x, w, b], {})
        want = torch.nn.functional.gelu(torch.nn.functional.linear(x.float(), w.float(), b.float()))
        assert got.shape == (1, rows, 20) and got.dtype == torch.bfloat16
        assert (got.float() - want).abs().max() <= 0.02 * want.abs().max() + 0.02
    assert calls == [("bf16_gemv", (1, 1, 40)), ("bf16_gemv", (1, 4, 40)), ("bf16_gemm", (1, 9, 40))]


@pytest.mark.parametrize("post_ops, fused", [
    ([{"kind": "silu"}], {"silu": True, "combine": "add", "operand": False}),
    ([{"kind": "add", "operand": 3}], {"silu": False, "combine": "add", "operand": True}),
    ([{"kind": "mul", "operand": 3}], {"silu": False, "combine": "mul", "operand": True}),
    ([{"kind": "silu"}, {"kind": "mul", "operand": 3}, {"kind": "relu"}], {"silu": True, "combine": "mul", "operand": True}),
    ([{"kind": "gelu"}, {"kind": "add", "operand": 3}], {"silu": False, "combine": "add", "operand": False}),
])
def test_bf16_storage_linear_hands_its_post_ops_to_the_gemm(post_ops, fused, monkeypatch):
    """A prompt's rows: bf16_gemm applies a leading SiLU and then an add / mul of an operand of the output's shape
    itself (a gate, a residual, SwiGLU's product), torch the rest after it; decode rows run all of them in torch.
    The result matches the node's reference (float32 linear, post-ops in turn) to bf16 rounding."""
    level = next((lv for lv in LEVELS if compute_precision.bf16_compute_dtype(lv) == "float32"), None)
    if level is None:
        pytest.skip("no level below bf16 arithmetic")
    calls = []
    real = native.raw.bf16_gemm
    monkeypatch.setattr(native.raw, "bf16_gemm", lambda *a, **kw: calls.append(kw) or real(*a, **kw), raising=False)
    torch.manual_seed(1)
    w, b = torch.randn(20, 40).bfloat16(), torch.randn(20).bfloat16()
    attrs = get_op("linear").parse_attrs({"post_ops": post_ops})
    spec = TensorSpec(dtype="bfloat16", shape=[1, "rows", 20])
    ctx = NodeContext(op="linear", attrs=attrs,
                      input_specs=(TensorSpec(dtype="bfloat16", shape=[1, "rows", 40]), TensorSpec(dtype="bfloat16", shape=[20, 40]),
                                   TensorSpec(dtype="bfloat16", shape=[20]), spec),
                      output_specs=(spec,), constants=(None, w, b, None), device="cpu", isa=level)
    kernel = linear_kernels.bf16_storage_linear(ctx)
    for rows in (3, 9):
        x, operand = torch.randn(1, rows, 40).bfloat16(), torch.randn(1, rows, 20).bfloat16()
        got = kernel.fn([x, w, b, operand], {})
        want = get_op("linear").reference([x.float(), w.float(), b.float(), operand.float()], attrs, {})
        assert (got.float() - want).abs().max() <= 0.02 * want.abs().max() + 0.02
    assert len(calls) == 1
    assert {"silu": calls[0]["silu"], "combine": calls[0]["combine"], "operand": calls[0]["operand"] is not None} == fused
