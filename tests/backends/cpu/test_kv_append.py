"""kv_append's growing cache on the CPU: equal to cat on every call, in place only when handed the view it
returned last, and a tensor it returned never changes afterwards."""
from __future__ import annotations

import torch

from ipexconvert.backends.cpu.kernels.kv_append import SPARE_POSITIONS, growing_kv_append


def _kernel():
    return growing_kv_append(None).fn


def _step(fn, past, new):
    out = fn([past, new], {})
    assert torch.equal(out, torch.cat([past, new], dim=2))
    return out


def test_a_generation_appends_in_place():
    fn = _kernel()
    past = torch.zeros(1, 2, 0, 4)
    first = _step(fn, past, torch.randn(1, 2, 5, 4))
    storage = first.untyped_storage().data_ptr()
    seen = [first.clone()]
    present = first
    for _ in range(SPARE_POSITIONS):  # every step fits the spare positions: the same buffer
        present = _step(fn, present, torch.randn(1, 2, 1, 4))
        assert present.untyped_storage().data_ptr() == storage
        seen.append(present.clone())
    assert torch.equal(first, seen[0])  # writing past its end left the first view as it was
    grown = _step(fn, present, torch.randn(1, 2, 1, 4))  # the buffer is full: a new one
    assert grown.untyped_storage().data_ptr() != storage and torch.equal(grown[:, :, :-1], seen[-1])


def test_a_past_used_twice_gets_a_copy_and_both_results_stay_right():
    fn = _kernel()
    base = _step(fn, torch.zeros(1, 1, 0, 3), torch.randn(1, 1, 4, 3))
    a_new, b_new = torch.randn(1, 1, 1, 3), torch.randn(1, 1, 1, 3)
    a = _step(fn, base, a_new)  # in place after base
    b = _step(fn, base, b_new)  # base is no longer the newest view: copied, a is untouched
    assert torch.equal(a[:, :, -1:], a_new) and torch.equal(b[:, :, -1:], b_new)
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()


def test_a_callers_tensor_is_never_written():
    fn = _kernel()
    mine = torch.randn(2, 2, 6, 8)
    kept = mine.clone()
    out = _step(fn, mine, torch.randn(2, 2, 3, 8))
    _step(fn, out, torch.randn(2, 2, 1, 8))
    assert torch.equal(mine, kept) and out.untyped_storage().data_ptr() != mine.untyped_storage().data_ptr()
