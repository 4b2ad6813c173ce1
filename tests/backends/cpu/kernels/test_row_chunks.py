"""_row_chunks: oneDNN's bf16 linear whole or in row chunks, as measured at the first call of a shape and row count.
The choice is checked with a fake clock (no timing here); the chunked kernel against the linear reference."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import BF16_TOLERANCE, context, reference, rel_err, run, runs_at_selected_level

from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels import _row_chunks
from ipexconvert.backends.cpu.kernels._runs_at import torch_onednn_float
from ipexconvert.backends.cpu.kernels._torch_onednn import isa_allows
from ipexconvert.backends.cpu.kernels.linear import build_linear_kernel, widens_many_rows
from ipexconvert.backends.cpu.self_check import torch_ops as probe


def matmul_call(weight: torch.Tensor):
    def call(x, operand):
        y = x @ weight.t()
        return y if operand is None else y + operand
    return call


class FakeClock:
    """perf_counter for choose(): each call of the wrapped function advances it by cost(rows)."""

    def __init__(self, cost):
        self.now, self.cost = 0.0, cost

    def __call__(self):
        return self.now

    def wrap(self, call):
        def timed(x, operand):
            self.now += self.cost(x.shape[0])
            return call(x, operand)
        return timed


@pytest.fixture(autouse=True)
def fresh_choices(monkeypatch):
    monkeypatch.setattr(_row_chunks, "_choices", {})
    monkeypatch.delenv("IPEXCONVERT_ROW_CHUNKS", raising=False)


@pytest.mark.parametrize("rows", [512, 700, 1024])
def test_chunks_give_the_whole_calls_rows(rows):
    g = torch.Generator().manual_seed(rows)
    weight, x = torch.randn(48, 40, generator=g, dtype=torch.float64), torch.randn(rows, 40, generator=g, dtype=torch.float64)
    operand = torch.randn(rows, 48, generator=g, dtype=torch.float64)
    call = matmul_call(weight)
    for op in (None, operand):
        assert torch.equal(_row_chunks.in_chunks(call, x, op, rows), call(x, op))  # the tail chunk (700) included


@pytest.mark.parametrize("whole_ms, chunk_ms, chunked", [
    (10.0, 1.0, True),     # 4 chunks of 1 ms against 10 ms whole
    (3.0, 1.0, False),     # 4 ms chunked against 3 ms whole
    (4.1, 1.0, False),     # 4 ms chunked is not a clear win (MARGIN)
])
def test_choose_keeps_the_faster_variant(monkeypatch, whole_ms, chunk_ms, chunked):
    clock = FakeClock(lambda rows: (whole_ms if rows > _row_chunks.CHUNK else chunk_ms) / 1e3)
    monkeypatch.setattr(_row_chunks.time, "perf_counter", clock)
    weight, x = torch.randn(8, 16), torch.randn(1024, 16)
    got_chunked, y = _row_chunks.choose(clock.wrap(matmul_call(weight)), x, None, 1024)
    assert got_chunked is chunked
    # (chunks of rows may take another float32 GEMM kernel than the whole, e.g. under IPEXCONVERT_MAX_ISA=avx2)
    assert torch.allclose(y, x @ weight.t(), rtol=1e-5, atol=1e-5)


def test_measures_once_per_shape_and_range_of_row_counts(monkeypatch):
    clock = FakeClock(lambda rows: (0.010 if rows > _row_chunks.CHUNK else 0.001))
    monkeypatch.setattr(_row_chunks.time, "perf_counter", clock)
    calls = []
    weight = torch.randn(8, 16)

    def call(x, operand):
        calls.append(x.shape[0])
        return clock.wrap(matmul_call(weight))(x, operand)

    run_a = _row_chunks.row_chunked(call, "layer", 8)
    run_b = _row_chunks.row_chunked(call, "layer", 8)  # another layer of the same shape shares the choice
    x = torch.randn(2, 512, 16)  # rank 3: 1024 rows
    y = run_a(x, None)
    assert y.shape == (2, 512, 8) and torch.allclose(y, x @ weight.t(), rtol=1e-5, atol=1e-5)
    measured = len(calls)
    assert _row_chunks._choices == {("layer", (1024).bit_length()): True}
    calls.clear()
    run_b(x, None)
    assert calls == [_row_chunks.CHUNK] * 4, "the second layer reuses the choice: 4 chunk calls, nothing timed"
    assert measured > 4
    calls.clear()
    run_a(torch.randn(1500, 16), None)  # the same range [1024, 2048): the choice holds, 6 chunks (the last of 220)
    assert calls == [_row_chunks.CHUNK] * 5 + [1500 - 5 * _row_chunks.CHUNK]
    calls.clear()
    run_a(torch.randn(2048, 16), None)  # the next range: measured again
    assert len(calls) > 8 and len(_row_chunks._choices) == 2
    calls.clear()
    run_a(torch.randn(3, 16), None)  # below MIN_ROWS: one call as given
    assert calls == [3]


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_ROW_CHUNKS", "0")
    call = matmul_call(torch.randn(4, 4))
    assert _row_chunks.row_chunked(call, "layer", 4) is call


# The real kernel: torch's oneDNN bf16 linear forced into chunks (or forced whole) at 600 rows (a tail chunk of 88),
# against the linear reference, with a unary post-op and a fused residual add.
HAS_BF16 = "bfloat16" in probe.checked_dtypes() and isa_allows(selected_isa(), "bfloat16")
RUNS_HERE = runs_at_selected_level("torch's oneDNN linear (build_linear_kernel)", torch_onednn_float)


@RUNS_HERE
@pytest.mark.skipif(not HAS_BF16, reason="no native bf16 here: oneDNN's bf16 linear does not run")
@pytest.mark.skipif(widens_many_rows(selected_isa(), "bfloat16"), reason="600 bf16 rows widen to MKL at this level")
@pytest.mark.parametrize("post_ops", [[], [{"kind": "gelu"}], [{"kind": "add", "operand": 3}]], ids=["none", "gelu", "add"])
@pytest.mark.parametrize("chunked", [True, False])
def test_bf16_linear_kernel_in_chunks_matches_reference(monkeypatch, post_ops, chunked):
    monkeypatch.setattr(_row_chunks, "choose", lambda call, x, op, rows: (chunked, (
        _row_chunks.in_chunks(call, x, op, rows) if chunked else call(x, op))))
    g = torch.Generator().manual_seed(7)
    weight, bias, x = torch.randn(96, 64, generator=g) / 8, torch.randn(96, generator=g), torch.randn(2, 300, 64, generator=g)
    exact = [x, weight, bias] + ([torch.randn(2, 300, 96, generator=g)] if post_ops and post_ops[0].get("operand") else [])
    tensors = [t.bfloat16() for t in exact]
    attrs = {"post_ops": post_ops}
    kernel = build_linear_kernel(context("linear", attrs, tensors, {1, 2}))
    assert kernel is not None and kernel.name == "torch_onednn:linear"
    got = run(kernel, tensors, {})
    assert got.shape == (2, 300, 96) and got.dtype == torch.bfloat16
    assert rel_err(got, reference("linear", attrs, exact)) < BF16_TOLERANCE
    assert list(_row_chunks._choices.values()) == [chunked]
