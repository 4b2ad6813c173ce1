"""The CPU kernels, one file per IR op: importing this package registers every factory in the kernel
registry (runtime/kernels.py) under ("cpu", op). Within an op's file the factories register in
preference order; the op's reference (ir/ops/<op>.py) runs when all of them decline.

Factory and kernel names say what runs: `native:` our own kernels (ipexconvert._native),
`onednn_direct:` our oneDNN primitives (ipexconvert._dnnl), `torch_onednn:` torch's oneDNN operators,
`torch_mkl:` torch's MKL packed GEMM. `ipexconvert doctor --kernels` prints the table.
"""
from . import (adaptive_avg_pool2d, add_layer_norm, aten, conv2d, gelu, layer_norm, linear, max_pool2d,  # noqa: F401
               qconv2d, qlinear, quantize, rms_norm, sdpa, silu, softmax, to_memory_format)
