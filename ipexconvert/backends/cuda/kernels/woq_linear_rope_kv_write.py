"""woq_linear_rope_kv_write on the GPU (made at load by backends/cuda/epilogues.py), the caches written in place.
Factory:

triton: up to MAX_ROWS rows of x (a decode step's tokens) in one woq_rows launch (woq_linear.py) whose last program
of each column block holds whole heads: it rotates the q and k heads, writes q into a new tensor and k and v into
the caches (_triton_jit.woq_rope_finish), so the projection never goes to memory and rope_kv_write's own kernel
does not run. More rows (a prompt), or inputs that kernel would not take: the projection on woq_linear's path, then
rope_kv_write's kernel (rope_kv_write.py). Float activations and caches of the projection's kind (not int8 rows)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ....ir.ops._kv_int8 import INT8_CACHE
from ....ir.ops.woq_linear_rope_kv_write import projection
from ....ir.spec import TensorSpec
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ._triton import triton_missing
from .rope_kv_write import triton_rope_kv_write
from .woq_linear import MAX_ROWS, TILES, float_rows, woq_rows_launcher

CACHE_SLOTS = frozenset({8, 9})  # cache_key, cache_value


@dataclass(frozen=True)
class RopeWrite:
    """What woq_rows' rope epilogue writes and reads: q_out, half the head dim, and its launch arguments (cos, sin,
    their batch and seq strides, position, the caches, seq, heads, kv_heads, capacity)."""
    q_out: torch.Tensor
    half: int
    args: tuple


def fits(head_dim: int, cache_dtype: str, activations: str, post_ops: list) -> bool:
    """Whether the fused kernel takes such a layer: every column block of woq_rows holds whole heads (a power-of-two
    head dim dividing the block), float activations, no post-ops, a float cache."""
    block_n = TILES["float"].block_n
    return (activations == "float" and not post_ops and cache_dtype != INT8_CACHE and head_dim >= 4
            and not head_dim & (head_dim - 1) and block_n % head_dim == 0)


@register_kernel("cuda", "woq_linear_rope_kv_write", runs_at=triton_missing)
def triton_woq_linear_rope_kv_write(ctx: NodeContext) -> Optional[Kernel]:
    """Up to 4 rows in one woq_rows launch whose last program of each column block rotates the q and k heads it
    holds and writes q and the caches (the projection never goes to memory, no rope_kv_write kernel); more rows (a
    prompt): the projection's path, then rope_kv_write's kernel. Float activations and a float cache."""
    attrs = ctx.attrs
    x_spec, cache_spec = ctx.input_specs[0], ctx.input_specs[8]
    kv_heads, head_dim = cache_spec.shape[1], cache_spec.shape[3]
    if not fits(head_dim, cache_spec.dtype, attrs.activations, attrs.post_ops):
        return None
    launcher = woq_rows_launcher(ctx, attrs.prologue)
    if launcher is None:
        return None
    launch, weight_inputs, weights, width = launcher
    op, op_attrs, _ = projection([None] * 6, attrs, None)
    # the prompt's path: dequantized once a call, on cuBLAS (bf16 weights: the GEMM in bf16, float_rows)
    project = float_rows(ctx, attrs.prologue, op.compile(op_attrs))
    n = ctx.output_specs[0].shape[1] * head_dim + 2 * kv_heads * head_dim  # q's heads * d + k and v
    qkv_spec = TensorSpec(dtype=x_spec.dtype, shape=[*x_spec.shape[:-1], n])
    rope_ctx = NodeContext(op="rope_kv_write", attrs=None, constants=(None,) * 6,
                           input_specs=(qkv_spec, *ctx.input_specs[6:]), output_specs=ctx.output_specs,
                           device=ctx.device, isa=ctx.isa)
    rope_kernel = triton_rope_kv_write(rope_ctx)
    if rope_kernel is None:
        return None
    heads = n // head_dim - 2 * kv_heads

    def separately(inputs: list, dims: dict[str, int]) -> list:
        qkv = project([inputs[0], *weight_inputs], dims)
        return rope_kernel.fn([qkv, *inputs[6:]], dims)

    def run(inputs: list, dims: dict[str, int]) -> list:
        x = inputs[0]
        cos, sin, cache_key, cache_value, position = inputs[6:]
        rows = x.numel() // width if width else 0
        if (rows == 0 or rows > MAX_ROWS or x.dim() != 3 or cos.stride(-1) != 1 or sin.stride() != cos.stride()
                or sin.shape != cos.shape or not (cache_key.is_contiguous() and cache_value.is_contiguous())):
            return separately(inputs, dims)
        batch, seq = x.shape[:2]
        q_out = torch.empty((batch, heads, seq, head_dim), dtype=x.dtype, device=x.device)
        table_batch = cos.stride(0) if cos.shape[0] > 1 else 0
        rope = RopeWrite(q_out, head_dim // 2, (cos, sin, table_batch, cos.stride(2), position, cache_key,
                                                cache_value, seq, heads, kv_heads, cache_key.shape[2]))
        launch(x, rows, [], rope)
        return [q_out, cache_key, cache_value]

    return Kernel(run, f"triton:{attrs.prologue or 'plain'}_woq_linear_rope_kv_write_rows",
                  frozenset(range(1, weights)), writes_inputs=CACHE_SLOTS)
