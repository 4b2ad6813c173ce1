"""rope_kv_write on the GPU, k and v written into the cache buffers in place (kv_write.py). Factories in
preference order:

triton: one kernel for the whole node (_triton_jit.rope_kv_write_heads: a program per head of each token, the
write position read on the GPU), where the reference's torch operators launch about twenty; an int8 cache's rows
(--kv-cache int8) quantized in the same pass.

torch_cuda: q and k rotated by torch's operators, then two index copies."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops._kv_int8 import INT8_CACHE, head_dim_of
from ....ir.ops.rope_kv_append import cache_head_dim, query_heads, rotated_heads, split_inputs, split_projections
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing
from .kv_write import scales_aligned, write_in_place


def _cache_slots(ctx: NodeContext) -> frozenset[int]:
    return frozenset({len(ctx.input_specs) - 3, len(ctx.input_specs) - 2})


def _torch_run(inputs: list):
    *projections, cos, sin, cache_key, cache_value, position = inputs
    q, k, v = rotated_heads(projections, cos, sin, cache_key.shape[1], cache_head_dim(cache_key))
    return [q, write_in_place(cache_key, k, position), write_in_place(cache_value, v, position)]


def _rows(x: torch.Tensor) -> bool:
    """[b, s, n] with contiguous rows (a merged projection's column slice qualifies)."""
    return x.stride(-1) == 1


@register_kernel("cuda", "rope_kv_write", runs_at=triton_missing)
def triton_rope_kv_write(ctx: NodeContext) -> Optional[Kernel]:
    cache_spec = ctx.input_specs[-3]
    rows_cache = cache_spec.dtype == INT8_CACHE  # rows of codes and a float32 scale (ir/ops/_kv_int8.py)
    kv_heads, head_dim = cache_spec.shape[1], head_dim_of(cache_spec.dtype, cache_spec.shape[3])
    if head_dim & (head_dim - 1) or head_dim < 4:
        return None  # the halves are loaded as power-of-two blocks
    projection_specs, _ = split_inputs(list(ctx.input_specs[:-1]))
    heads = query_heads([p.shape for p in projection_specs], kv_heads, head_dim)  # (fixed by the specs)

    def run(inputs: list, dims: dict[str, int]):
        *projections, cos, sin, cache_key, cache_value, position = inputs
        batch, seq = projections[0].shape[:2]
        capacity = cache_key.shape[2]
        q, k, v = split_projections(projections, heads, kv_heads, head_dim)
        if not (all(_rows(t) for t in (q, k, v, cos)) and sin.stride() == cos.stride() and sin.shape == cos.shape
                and cache_key.is_contiguous() and cache_value.is_contiguous()
                and (not rows_cache or (scales_aligned(cache_key) and scales_aligned(cache_value)))):
            return _torch_run(inputs)
        q_out = torch.empty((batch, heads, seq, head_dim), dtype=q.dtype, device=q.device)
        table_batch = cos.stride(0) if cos.shape[0] > 1 else 0
        if seq and batch:
            _triton.jit().rope_kv_write_heads[(batch * seq, heads + 2 * kv_heads)](
                q, k, v, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                cos, sin, table_batch, cos.stride(2), position, q_out, cache_key, cache_value,
                seq, heads, kv_heads, capacity, HALF=head_dim // 2, ROWS=int(rows_cache), num_warps=1)
        return [q_out, cache_key, cache_value]

    return Kernel(run, "triton:rope_kv_write_in_place", writes_inputs=_cache_slots(ctx))


@register_kernel("cuda", "rope_kv_write")
def torch_cuda_rope_kv_write(ctx: NodeContext) -> Kernel:
    return Kernel(lambda inputs, dims: _torch_run(inputs), "torch_cuda:rope_kv_write_in_place",
                  writes_inputs=_cache_slots(ctx))
