"""capture() (native/python/capture.cpp): the kernel calls of a list of callables recorded once (every check of the
binding runs then, no kernel does) and made in order by one call of the returned CallList, reading and writing the
same tensors every time; kernels that are not recordable, callables that make no native call or several, and nested
captures give no list; an error in a callable propagates and leaves capture off."""
from __future__ import annotations

import functools

import pytest
import torch

import native_ops as native

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")


def _decode_layer_calls():
    """rms_norm -> int8 weight-only GEMV (decode path) -> silu(gate) * up, into buffers made once."""
    torch.manual_seed(0)
    raw, k, n = native.raw, 64, 48
    x, weight = torch.randn(1, k), torch.rand(k) + 0.5
    normed, projected, gated = torch.empty(1, k), torch.empty(1, 2 * n), torch.empty(1, n)
    codes = torch.randint(-127, 128, (2 * n, k), dtype=torch.int8)
    scales = torch.rand(2 * n, 1) * 0.01 + 0.001
    packed, qparams, _ = native.pack_woq_weight(codes, scales, None, 8, k)
    calls = [functools.partial(raw.rms_norm, x, None, weight, 1e-6, normed, None, None, 2),
             functools.partial(raw.woq_gemm, normed, packed, 2 * n, 8, k, qparams, False, None, projected, None, 2, 1),
             functools.partial(raw.silu_mul_halves, projected, gated, None, 2)]
    return calls, x, (normed, projected, gated)


def test_a_captured_list_makes_the_same_calls_on_the_same_tensors():
    calls, x, outputs = _decode_layer_calls()
    for out in outputs:
        out.fill_(float("nan"))
    replay = native.raw.capture(calls)
    assert replay is not None and len(replay) == 3
    assert all(out.isnan().all() for out in outputs)  # recorded, not made
    for _ in range(2):  # new contents of the same input, read by the recorded calls
        x.normal_()
        replay()
        got = [out.clone() for out in outputs]
        for call in calls:
            call()
        assert all(torch.equal(a, b) for a, b in zip(got, outputs))


def test_calls_that_cannot_be_recorded_give_no_list_and_run_nothing():
    calls, _, (normed, _, _) = _decode_layer_calls()
    y = torch.full((1, 2, 2, 4), float("nan"))
    # to_channels_last's finite check writes into a flag of the call's own: that call does not opt in
    not_recordable = functools.partial(native.raw.to_channels_last, torch.randn(1, 4, 2, 2), y, 1.0, 0, None, 2, True)
    assert native.raw.capture([calls[0], not_recordable]) is None
    assert y.isnan().all()
    assert native.raw.capture([calls[0], lambda: None]) is None  # no native call
    assert native.raw.capture([lambda: (calls[0](), calls[2]())]) is None  # two
    assert len(native.raw.capture([calls[0]])) == 1  # capture is off again after each refusal
    calls[2]()  # and kernels run when called


def test_errors_propagate_and_leave_capture_off():
    calls, _, _ = _decode_layer_calls()
    bad = functools.partial(native.raw.silu_mul_halves, torch.empty(1, 3), torch.empty(1, 1), None, 2)  # odd dim
    with pytest.raises(ValueError, match="even last dim"):
        native.raw.capture([calls[0], bad])
    with pytest.raises(ValueError, match="cannot be nested"):
        native.raw.capture([lambda: native.raw.capture([calls[0]])])
    y = torch.full((1, 64), float("nan"))
    native.raw.gelu(torch.zeros(1, 64), False, y, None, 2)
    assert torch.equal(y, torch.zeros(1, 64))  # a plain call runs


def test_a_length_cell_is_read_when_a_recorded_cache_append_and_attention_run():
    """rope_kv_append and decode_attention given a length cell: recorded once, each run appends at, and attends over,
    the length the cell holds then (what plain calls at that position, over views of that length, give); a length
    the buffers have no room for raises and writes nothing."""
    raw = native.raw
    torch.manual_seed(0)
    heads, kv_heads, d, capacity = 4, 2, 16, 8
    columns = (heads, heads + kv_heads)
    qkv = torch.randn(1, 1, (heads + 2 * kv_heads) * d)
    cos, sin = torch.randn(1, 1, 1, d), torch.randn(1, 1, 1, d)
    keys, values = torch.randn(1, kv_heads, capacity, d), torch.randn(1, kv_heads, capacity, d)
    mask = torch.randn(1, 1, 1, capacity)
    q_out, out = torch.empty(1, heads, 1, d), torch.empty(1, heads, 1, d)
    cell = torch.tensor([3])
    append = functools.partial(raw.rope_kv_append, qkv, 0, qkv, columns[0] * d, qkv, columns[1] * d, cos, sin)
    replay = raw.capture([functools.partial(append, q_out, keys, values, -1, None, 2, cell),
                          functools.partial(raw.decode_attention, q_out, keys, values, out, mask, 0.25, None, 2, cell)])
    assert replay is not None and len(replay) == 2
    for length in (3, 6, 7):
        cell[0] = length
        qkv.normal_()
        want_keys, want_values, want_q, want = keys.clone(), values.clone(), torch.empty_like(q_out), torch.empty_like(out)
        replay()
        append(want_q, want_keys, want_values, length, None, 2)
        n = length + 1
        raw.decode_attention(want_q, want_keys[:, :, :n], want_values[:, :, :n], want, mask[..., :n], 0.25, None, 2)
        assert torch.equal(keys, want_keys) and torch.equal(values, want_values)
        assert torch.equal(q_out, want_q) and torch.equal(out, want)
    cell[0] = capacity  # no room for one more position
    before = keys.clone()
    with pytest.raises(IndexError, match="do not fit"):
        replay()
    assert torch.equal(keys, before)
    with pytest.raises(ValueError, match="position must be -1"):
        append(q_out, keys, values, 2, None, 2, torch.tensor([3]))
    with pytest.raises(ValueError, match="1-element int64"):
        raw.decode_attention(q_out, keys, values, out, mask, 0.25, None, 2, torch.tensor([3.0]))


def test_copy_row_copies_the_row_of_the_length_a_cell_holds_when_it_runs():
    table, out, cell = torch.arange(12.0).reshape(4, 3), torch.empty(3), torch.tensor([5])
    replay = native.raw.capture([functools.partial(native.raw.copy_row, table, out, cell, 4)])
    assert replay is not None and len(replay) == 1
    for length in (5, 7, 4):
        cell[0] = length
        replay()
        assert torch.equal(out, table[length - 4])
    for outside in (3, 8):  # rows 0..3 hold lengths 4..7
        cell[0] = outside
        with pytest.raises(IndexError, match="not in the table"):
            replay()
    with pytest.raises(ValueError, match="elements of a row"):
        native.raw.copy_row(table, torch.empty(4), cell, 4)
    with pytest.raises(ValueError, match="dtype"):
        native.raw.copy_row(table, torch.empty(3, dtype=torch.float64), cell, 4)
