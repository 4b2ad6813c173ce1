"""rope_kv_write on the GPU: q and k rotated by torch's operators, k and v written into the cache buffers in
place (kv_write.py)."""
from __future__ import annotations

from ....ir.ops.rope_kv_write import rotated_heads
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .kv_write import write_in_place


@register_kernel("cuda", "rope_kv_write")
def torch_cuda_rope_kv_write(ctx: NodeContext) -> Kernel:
    def run(inputs: list, dims: dict[str, int]):
        *projections, cos, sin, cache_key, cache_value, position = inputs
        q, k, v = rotated_heads(projections, cos, sin, cache_key.shape[1], cache_key.shape[3])
        return [q, write_in_place(cache_key, k, position), write_in_place(cache_value, v, position)]

    return Kernel(run, "torch_cuda:rope_kv_write_in_place")
