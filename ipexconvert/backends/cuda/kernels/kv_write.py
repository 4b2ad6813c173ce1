"""kv_write on the GPU: the new positions copied into the cache buffer in place (the static cache's point: the
buffer a captured CUDA graph reads and writes stays where it is). The write position stays on the GPU."""
from __future__ import annotations

from ....ir.ops._kv_int8 import to_cache
from ....ir.ops.kv_write import positions_of
from ....runtime.kernels import Kernel, NodeContext, register_kernel


def scales_aligned(cache) -> bool:
    """Every row's float32 scale of an int8 cache (ir/ops/_kv_int8.py) at a 4-byte boundary: the Triton kernels
    read and write it as one float32."""
    return cache.data_ptr() % 4 == 0 and all(cache.stride(i) % 4 == 0 for i in range(cache.dim() - 1))


def write_in_place(cache, new, position):
    return cache.index_copy_(2, positions_of(position, new.shape[2]), to_cache(new, cache.dtype))  # (narrower: rounded)


@register_kernel("cuda", "kv_write")
def torch_cuda_kv_write(ctx: NodeContext) -> Kernel:
    return Kernel(lambda inputs, dims: write_in_place(*inputs), "torch_cuda:kv_write_in_place",
                  writes_inputs=frozenset({0}))
