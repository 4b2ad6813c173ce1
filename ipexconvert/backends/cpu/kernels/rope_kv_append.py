"""rope_kv_append on the CPU: q rotated into a fresh tensor, k rotated and v copied straight into growing
caches (kv_append's buffers with spare positions, written in place when handed the present returned last).
The native kernel does all of it in one pass over the projections; without the extension, torch does it."""
from __future__ import annotations

from functools import partial
from typing import Optional

import torch

from ....ir.ops._kv_int8 import head_dim_of, to_cache
from ....ir.ops.rope import RopeOp
from ....ir.ops.rope_kv_append import heads_of, query_heads, split_inputs, split_projections
from ....runtime import kernels
from ....runtime.bound_plan import RecordedStep
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at
from .kv_append import _GrowingCache


def _shape(ctx: NodeContext):
    """(merged, heads, kv_heads, head size) of the node (fixed by its specs, checked at load)."""
    projections, (_, _, past_key, _) = split_inputs(list(ctx.input_specs))
    kv_heads, d = past_key.shape[1], head_dim_of(past_key.dtype, past_key.shape[3])
    heads = query_heads([p.shape for p in projections], kv_heads, d)
    return len(projections) == 1, heads, kv_heads, d


@kernels.register_kernel("cpu", "rope_kv_append", runs_at=_runs_at.native)
def native_rope_kv_append(ctx: NodeContext):
    """Native: one pass reading q, k and v in place (column ranges of a merged projection, or three tensors)."""
    specs = list(ctx.input_specs)
    caches = specs[-2:]  # float32, bfloat16, or int8 rows (ir/ops/_kv_int8.py)
    if ctx.device != "cpu" or not all(s is not None and s.dtype in _native.DTYPES for s in specs[:-2]) \
            or not all(s is not None and s.dtype in (*_native.DTYPES, "int8") for s in caches):
        return None
    merged, heads, kv_heads, d = _shape(ctx)
    if d > 1024:
        return None
    offsets = (0, heads * d, (heads + kv_heads) * d) if merged else (0, 0, 0)
    keys, values = _GrowingCache(), _GrowingCache()
    lib, isa = _native.native_lib.raw, ctx.isa

    def append(q, k, v, cos, sin, past_key, past_value, q_out, threads):
        """The native pass: q rotated into q_out, k rotated and v copied into the caches grown by q's positions."""
        seq = q.shape[1]
        key_buffer, present_key = keys.reserve(past_key, seq, past_key)
        value_buffer, present_value = values.reserve(past_value, seq, past_value)
        lib.rope_kv_append(q, offsets[0], k, offsets[1], v, offsets[2], cos, sin, q_out,
                           key_buffer, value_buffer, past_key.shape[2], isa, threads)
        return q_out, present_key, present_value

    def run(inputs, dims):
        projections, (cos, sin, past_key, past_value) = split_inputs(inputs)
        q, k, v = projections * 3 if merged else projections
        q_out = torch.empty((q.shape[0], heads, q.shape[1], d), dtype=q.dtype)
        cos, sin = (t if t.is_contiguous() else t.contiguous() for t in (cos, sin))
        return append(q, k, v, cos, sin, past_key, past_value, q_out, torch.get_num_threads())

    def bind_varying(inputs, dims, varying):
        """Only the caches change between calls: q and the rotary tables are read from these tensors, q written
        into one made here."""
        projections, (cos, sin, _, _) = split_inputs(inputs)
        cache_inputs = frozenset(range(len(inputs) - 2, len(inputs)))
        if not varying <= cache_inputs or not (cos.is_contiguous() and sin.is_contiguous()):
            return None
        q, k, v = projections * 3 if merged else projections
        q_out = torch.empty((q.shape[0], heads, q.shape[1], d), dtype=q.dtype)
        threads = torch.get_num_threads()

        def bound(inputs, dims):
            return append(q, k, v, cos, sin, inputs[-2], inputs[-1], q_out, threads)

        def record(inputs, results, length_at, buffer_for) -> Optional[RecordedStep]:
            """The append into the buffers the last call wrote (their spare positions: a plan with a longer cache
            binds again), at the position length_at holds when it runs; the presents are views made per run."""
            seq = q.shape[1]
            if inputs[-2].shape[2] != int(length_at):
                return None
            key_buffer, value_buffer = keys.hand_over(results[1]), values.hand_over(results[2])
            if key_buffer is None or value_buffer is None:
                return None
            call = partial(lib.rope_kv_append, q, offsets[0], k, offsets[1], v, offsets[2], cos, sin, q_out,
                           key_buffer, value_buffer, -1, isa, threads, length_at)
            return RecordedStep(
                call=call, max_length=min(key_buffer.shape[2], value_buffer.shape[2]) - seq,
                buffers={1: (key_buffer, 2), 2: (value_buffer, 2)}, added=seq,
                feeds={len(inputs) - 2: 1, len(inputs) - 1: 2})

        bound.record = record
        return bound

    # Not fresh_output: the presents are views of buffers that the pasts given may view too (kv_append's kernel alike).
    return Kernel(run, _native.kernel_name("rope_kv_append", "rope_kv_append", isa), bind_varying=bind_varying)


@kernels.register_kernel("cpu", "rope_kv_append")
def growing_rope_kv_append(ctx: NodeContext):
    """Plain torch into the same growing caches (no native extension)."""
    _, heads, kv_heads, d = _shape(ctx)
    keys, values = _GrowingCache(), _GrowingCache()

    def run(inputs, dims):
        projections, (cos, sin, past_key, past_value) = split_inputs(inputs)
        q, k, v = split_projections(projections, heads, kv_heads, d)
        q, k, v = heads_of(q, heads, d), heads_of(k, kv_heads, d), heads_of(v, kv_heads, d)
        length, seq = past_key.shape[2], q.shape[2]
        _, present_key = keys.reserve(past_key, seq, past_key)
        _, present_value = values.reserve(past_value, seq, past_value)
        present_key[:, :, length:].copy_(to_cache(RopeOp.reference([k, cos, sin], None, dims), present_key.dtype))
        present_value[:, :, length:].copy_(to_cache(v, present_value.dtype))
        return RopeOp.reference([q, cos, sin], None, dims), present_key, present_value

    return Kernel(run, "growing:rope_kv_append")
