"""native_bf16_amx_linear: bf16 linear on AMX tiles (bf16_amx_gemm) up to AMX_MAX_ROWS rows, torch's oneDNN linear for
more, against the linear reference; the nodes it leaves to torch's oneDNN linear; its switch."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import BF16_TOLERANCE, context, reference, rel_err, run

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels import linear
from ipexconvert.backends.cpu.kernels._runs_at import native_amx_linear

AMX = native_lib.available() and native_lib.kernel_level("bf16_amx_gemm", selected_isa()) == "amx"
pytestmark = pytest.mark.skipif(not AMX, reason="needs the native build on a CPU with AMX")


def node(post_ops, rows, n=96, k=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    exact = [torch.randn(rows, k, generator=g), torch.randn(n, k, generator=g) / 8, torch.randn(n, generator=g)]
    if any(p.get("operand") for p in post_ops):
        exact.append(torch.randn(rows, n, generator=g))
    tensors = [t.bfloat16() for t in exact]
    attrs = {"post_ops": post_ops}
    return context("linear", attrs, tensors, {1, 2}, dynamic_batch=True), tensors, exact, attrs


class CountingLib:
    """native_lib.raw with its bf16_amx_gemm calls counted."""

    def __init__(self, raw):
        self.raw, self.calls = raw, 0

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def bf16_amx_gemm(self, *args):
        self.calls += 1
        return self.raw.bf16_amx_gemm(*args)


@pytest.mark.parametrize("post_ops", [[], [{"kind": "gelu"}], [{"kind": "relu"}]], ids=["none", "gelu", "relu"])
@pytest.mark.parametrize("rows, on_tiles", [(1, True), (45, True), (linear.AMX_MAX_ROWS, True),
                                            (linear.AMX_MAX_ROWS + 1, False), (3000, False)])
def test_rows_up_to_the_bound_on_tiles_more_on_onednn(monkeypatch, post_ops, rows, on_tiles):
    counting = CountingLib(native_lib.raw)
    monkeypatch.setattr(native_lib, "raw", counting)
    ctx, tensors, exact, attrs = node(post_ops, rows)
    kernel = linear.native_bf16_amx_linear(ctx)
    assert kernel is not None and kernel.name == linear.AMX_OR_ONEDNN
    got = run(kernel, tensors, {})
    assert got.shape == (rows, 96) and got.dtype == torch.bfloat16
    assert rel_err(got, reference("linear", attrs, exact)) < BF16_TOLERANCE
    assert counting.calls == (1 if on_tiles else 0)


@pytest.mark.parametrize("post_ops, n, k, dtype", [
    ([{"kind": "gelu_tanh"}], 96, 64, torch.bfloat16),              # a post-op the kernel does not fuse
    ([{"kind": "add", "operand": 3}], 96, 64, torch.bfloat16),      # a binary post-op
    ([{"kind": "gelu"}, {"kind": "relu"}], 96, 64, torch.bfloat16),  # more than one
    ([], 48, 64, torch.bfloat16),                                   # channels not a multiple of 32
    ([], 96, 40, torch.bfloat16),                                   # k not a multiple of 32
    ([], 96, 64, torch.float32),                                    # not bf16
])
def test_declines_what_it_does_not_run(post_ops, n, k, dtype):
    g = torch.Generator().manual_seed(1)
    tensors = [torch.randn(8, k, generator=g), torch.randn(n, k, generator=g), torch.randn(n, generator=g)]
    if post_ops and post_ops[0].get("operand"):
        tensors.append(torch.randn(8, n, generator=g))
    tensors = [t.to(dtype) for t in tensors]
    assert linear.native_bf16_amx_linear(context("linear", {"post_ops": post_ops}, tensors, {1, 2})) is None


def test_switched_off_by_the_environment(monkeypatch):
    assert native_amx_linear("amx") is None
    monkeypatch.setenv("IPEXCONVERT_AMX_GEMM", "0")
    assert "IPEXCONVERT_AMX_GEMM=0" in native_amx_linear("amx")
    assert native_amx_linear("avx512_bf16") is not None  # no build below amx


def test_onednn_weight_packed_only_when_many_rows_come(monkeypatch):
    packs = []
    real = linear.torch_ops.op_for

    def counting_op_for(name, dtype):
        op = real(name, dtype)
        if name != "mkldnn._reorder_linear_weight" or op is None:
            return op
        return lambda *a: packs.append(1) or op(*a)

    monkeypatch.setattr(linear.torch_ops, "op_for", counting_op_for)
    ctx, tensors, _, _ = node([], 16)
    kernel = linear.native_bf16_amx_linear(ctx)
    run(kernel, tensors, {})
    assert packs == []
    many = node([], linear.AMX_MAX_ROWS + 1)[1]
    run(kernel, many, {})
    run(kernel, many, {})
    assert packs == [1]


def test_onednn_weight_dropped_once_every_range_chose_the_tiles(monkeypatch):
    packs = []
    real = linear.torch_ops.op_for

    def counting_op_for(name, dtype):
        op = real(name, dtype)
        return (lambda *a: packs.append(1) or op(*a)) if name == "mkldnn._reorder_linear_weight" and op else op

    monkeypatch.setattr(linear.torch_ops, "op_for", counting_op_for)
    monkeypatch.setattr(linear, "InSitu", lambda tiles, onednn, on_choice: FirstWins(tiles, onednn, on_choice))
    ctx, tensors, exact, attrs = node([], 16)
    kernel = linear.native_bf16_amx_linear(ctx)
    run(kernel, tensors, {})  # measures both: oneDNN's weight packed, then dropped as the tiles won
    assert packs == [1]
    got = run(kernel, tensors, {})
    assert packs == [1] and rel_err(got, reference("linear", attrs, exact)) < BF16_TOLERANCE
    run(kernel, node([], linear.AMX_MAX_ROWS + 1)[1][:1] + tensors[1:], {})  # more rows: packed again
    assert packs == [1, 1]


class FirstWins:
    """An InSitu stand-in that runs both ways on its first call and chooses the first."""

    def __init__(self, first, second, on_choice):
        self.first, self.second, self.on_choice, self.choices, self.measuring = first, second, on_choice, {}, False

    def __call__(self, rows, *args):
        if not self.choices:
            self.second(*args)
            self.choices[1] = True
            self.on_choice(1, True)
        return self.first(*args)


def test_always_runs_the_tiles_without_measuring(monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_AMX_GEMM", "always")
    monkeypatch.setattr(linear, "InSitu", lambda *a, **kw: pytest.fail("measured although told always"))
    counting = CountingLib(native_lib.raw)
    monkeypatch.setattr(native_lib, "raw", counting)
    ctx, tensors, exact, attrs = node([], 40)
    kernel = linear.native_bf16_amx_linear(ctx)
    for _ in range(3):
        run(kernel, tensors, {})
    assert counting.calls == 3 and kernel.name == "native:bf16_amx_gemm"
