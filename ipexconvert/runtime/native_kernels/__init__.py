"""Native CPU kernels (ipexconvert._native) in the kernel registry, one op per file.

A factory declines (returns None, so the op's reference runs) when the extension is not built
or the node is outside what the kernel covers: dtype other than float32/bfloat16, channels-last
or constant activations, normalisation over more than the last dim, softmax over another dim,
a broadcast residual. A kernel also falls back to the reference at run time for a
non-contiguous input.
"""
from . import (adaptive_avg_pool2d, add_layer_norm, concat, gelu, layer_norm, qconv2d, qlinear, quantize,  # noqa: F401
               rms_norm, sdpa, silu, softmax, to_memory_format)  # (registers)
