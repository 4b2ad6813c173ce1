"""What the native int8 GEMM kernels (qlinear, qconv2d) share: when they run, the packed weight
and folded scales, and the GEMM call with its epilogue.

They run where oneDNN's int8 does not: below avx512_vnni, oneDNN's u8 x s8 products saturate
(runtime/cpu_kernels/_common.int8_allowed), so without these every int8 layer ran its float
reference. The kernel (native/kernels/int8_gemm.cpp) widens to int16 and sums exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ... import native
from ...ir.ops._quant import finish
from ..cpu import ISA_LEVELS
from ..cpu_kernels._common import enabled, int8_allowed, int8_weight_params
from ..kernels import NodeContext

_OUT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "uint8": torch.uint8, "int8": torch.int8}


def runs_here(ctx: NodeContext) -> bool:
    """The native int8 GEMM takes this node: built, on the CPU, at avx2 or above but below the
    level where oneDNN's int8 runs, uint8 activations and a supported output dtype."""
    if ctx.device != "cpu" or not native.available() or not enabled():
        return False
    level = ISA_LEVELS.index(ctx.isa)
    if level < ISA_LEVELS.index("avx2") or int8_allowed(ctx.isa):
        return False
    return ctx.input_specs[0].dtype == "uint8" and ctx.attrs.output_dtype in _OUT_DTYPES


@dataclass
class Int8Gemm:
    """One layer's GEMM: weight [n, k] packed once, scales x_scale * w_scale folded, the leading relu
    fused, the other post-ops (and a quantized output after them) in the reference's epilogue."""

    packed: torch.Tensor
    n: int
    k: int
    scales: torch.Tensor
    bias: Optional[torch.Tensor]
    relu: bool
    fully_fused: bool  # no post-ops left: the kernel writes the output dtype itself
    attrs: object
    isa: str

    @classmethod
    def build(cls, ctx: NodeContext, weight_2d: torch.Tensor) -> Optional["Int8Gemm"]:
        params = int8_weight_params(ctx)
        if params is None:
            return None
        _, w_scales, bias = params
        a = ctx.attrs
        n, k = weight_2d.shape
        if k > 65536 or w_scales.numel() != n or (bias is not None and bias.numel() != n):
            return None
        post = a.post_ops
        relu = bool(post) and post[0].kind == "relu" and post[0].operand is None
        tail = post[1:] if relu else post
        scales = (torch.tensor(a.x_scale, dtype=torch.float64) * w_scales.double()).float().contiguous()
        return cls(native.pack_int8_weight(weight_2d.contiguous()), n, k, scales, bias, relu, not tail, a, ctx.isa)

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """rows: uint8 [m, k] -> [m, n]: the output dtype when fully_fused, else float32 awaiting finish()."""
        a = self.attrs
        out_dtype = _OUT_DTYPES[a.output_dtype] if self.fully_fused else torch.float32
        out = torch.empty((rows.shape[0], self.n), dtype=out_dtype)
        native.raw.int8_gemm(rows, a.x_zero_point, self.packed, self.n, self.scales, self.bias, self.relu, out,
                             a.output_scale, a.output_zero_point, self.isa, torch.get_num_threads())
        return out

    def finish(self, y: torch.Tensor, operands: list) -> torch.Tensor:
        """The post-ops after the fused relu, then the output dtype, as the reference does them."""
        a = self.attrs
        return finish(y, a.post_ops[1:] if self.relu else a.post_ops, operands, a)
