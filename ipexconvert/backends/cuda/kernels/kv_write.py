"""kv_write on the GPU: the new positions copied into the cache buffer in place (the static cache's point: the
buffer a captured CUDA graph reads and writes stays where it is). The write position stays on the GPU."""
from __future__ import annotations

from ....ir.ops._kv_int8 import to_cache
from ....ir.ops.kv_write import positions_of
from ....runtime.kernels import Kernel, NodeContext, register_kernel


def write_in_place(cache, new, position):
    return cache.index_copy_(2, positions_of(position, new.shape[2]), to_cache(new, cache.dtype))  # (narrower: rounded)


@register_kernel("cuda", "kv_write")
def torch_cuda_kv_write(ctx: NodeContext) -> Kernel:
    return Kernel(lambda inputs, dims: write_in_place(*inputs), "torch_cuda:kv_write_in_place",
                  writes_inputs=frozenset({0}))
