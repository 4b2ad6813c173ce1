"""rope_kv_append's CPU kernels (native, and plain torch without the extension): equal to the op's reference on
every step of a generation, the caches grown in place when handed the presents they returned last, and a tensor
they returned or were given never changes afterwards."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels.kv_append import SPARE_POSITIONS
from ipexconvert.backends.cpu.kernels.rope_kv_append import growing_rope_kv_append, native_rope_kv_append
from ipexconvert.ir import TensorSpec, dtypes
from ipexconvert.ir.ops.rope_kv_append import RopeKvAppendOp
from ipexconvert.runtime.kernels import NodeContext

HEADS, KV_HEADS, D = 4, 2, 16
FACTORIES = [growing_rope_kv_append] + ([native_rope_kv_append] if native_lib.available() else [])


def _kernel(factory, dtype=torch.float32):
    specs = [TensorSpec(dtype=dtypes.to_name(dtype), shape=["batch", "seq", (HEADS + 2 * KV_HEADS) * D]),
             TensorSpec(dtype="float32", shape=[1, 1, "seq", D]), TensorSpec(dtype="float32", shape=[1, 1, "seq", D]),
             TensorSpec(dtype=dtypes.to_name(dtype), shape=["batch", KV_HEADS, "past", D]),
             TensorSpec(dtype=dtypes.to_name(dtype), shape=["batch", KV_HEADS, "past", D])]
    ctx = NodeContext(op="rope_kv_append", attrs=None, constants=(None,) * 5, input_specs=tuple(specs),
                      output_specs=tuple(RopeKvAppendOp.infer(specs, None)), device="cpu", isa=selected_isa())
    return factory(ctx).fn


def _step(fn, past_key, past_value, seq, seed):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(past_key.shape[0], seq, (HEADS + 2 * KV_HEADS) * D, generator=g).to(past_key.dtype)
    cos, sin = torch.randn(1, 1, seq, D, generator=g), torch.randn(1, 1, seq, D, generator=g)
    inputs = [qkv, cos, sin, past_key, past_value]
    got = fn(inputs, {})
    want = RopeKvAppendOp.reference(inputs, None, {})
    for g_, w in zip(got, want):
        torch.testing.assert_close(g_, w, rtol=1e-6, atol=1e-6)  # (FMA contraction: not always bit-exact)
    return got


@pytest.mark.parametrize("factory", FACTORIES)
def test_a_generation_grows_both_caches_in_place(factory):
    fn = _kernel(factory)
    empty = torch.zeros(1, KV_HEADS, 0, D)
    _, key, value = _step(fn, empty, empty, 5, 0)
    storages = key.untyped_storage().data_ptr(), value.untyped_storage().data_ptr()
    first = key.clone(), value.clone()
    for step in range(SPARE_POSITIONS):
        _, key, value = _step(fn, key, value, 1, step + 1)
        assert (key.untyped_storage().data_ptr(), value.untyped_storage().data_ptr()) == storages
    assert torch.equal(key[:, :, :5], first[0]) and torch.equal(value[:, :, :5], first[1])
    _, grown, _ = _step(fn, key, value, 1, 999)  # full: new buffers holding the old positions
    assert grown.untyped_storage().data_ptr() != storages[0] and torch.equal(grown[:, :, :-1], key)


@pytest.mark.parametrize("factory", FACTORIES)
def test_an_older_past_or_a_callers_cache_is_copied_not_written(factory):
    fn = _kernel(factory, torch.bfloat16)
    mine_key, mine_value = torch.randn(2, KV_HEADS, 3, D).bfloat16(), torch.randn(2, KV_HEADS, 3, D).bfloat16()
    kept = mine_key.clone(), mine_value.clone()
    _, a_key, a_value = _step(fn, mine_key, mine_value, 1, 1)
    assert torch.equal(mine_key, kept[0]) and torch.equal(mine_value, kept[1])
    _, b_key, _ = _step(fn, mine_key, mine_value, 1, 2)  # the same past again: a copy, a_key untouched
    assert a_key.untyped_storage().data_ptr() != b_key.untyped_storage().data_ptr()
    assert not torch.equal(a_key[:, :, -1], b_key[:, :, -1])
    _step(fn, a_key, a_value, 2, 3)  # a_key is no longer the newest present: copied again
