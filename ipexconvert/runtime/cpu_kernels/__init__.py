"""Native CPU kernels: conv2d (float32, bfloat16) and linear (bfloat16) through the oneDNN ops bundled with
torch, float32 linear through its MKL packed GEMM, and int8 qconv2d / qlinear through oneDNN;
conv2d, qconv2d, qlinear and max_pool2d first try direct oneDNN primitives (ipexconvert.dnnl, *_dnnl.py).

Importing this package registers the kernel factories (they run before the op's
reference). Each factory packs its constant weight once, at load, into oneDNN's
blocked layout and keeps it for the model's life; packed tensors are opaque and
cannot be serialised, so the artifact always stores the plain weight.

The private ops are checked once per process (see probe.py) before the first
factory uses them; an op that is missing or computes wrong numbers makes the
factories decline, with one warning naming the op.

IPEXCONVERT_ONEDNN=0 turns these kernels off (the references run), for debugging
and for timing against the references.
"""
# Registration order is preference order: the direct oneDNN layers first, torch's operators next.
from . import conv2d_dnnl, max_pool2d_dnnl, qconv2d_dnnl, qlinear_dnnl  # noqa: F401,I001  (registers the factories)
from . import conv2d_onednn, linear_mkl, linear_onednn, qconv2d_onednn, qlinear_onednn  # noqa: F401
from .probe import probe_report  # noqa: F401

__all__ = ["probe_report"]
