"""qlinear on the native exact int8 GEMM, below avx512_vnni (see _int8_gemm.py)."""
from __future__ import annotations

from typing import Optional

from ..kernels import Kernel, NodeContext, register_kernel
from ._int8_gemm import Int8Gemm, runs_here


@register_kernel("cpu", "qlinear")
def native_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    if not runs_here(ctx) or ctx.constants[1] is None or ctx.constants[1].dim() != 2:
        return None
    gemm = Int8Gemm.build(ctx, ctx.constants[1])
    if gemm is None:
        return None
    k, n = gemm.k, gemm.n

    def run(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        rows = x.reshape(-1, k)
        rows = rows if rows.stride(-1) == 1 else rows.contiguous()
        y = gemm(rows, rows.shape[0], inputs, lambda r: r.reshape(-1, n)).view(*x.shape[:-1], n)
        return gemm.finish(y, inputs)

    held = {1, 2, 3} if ctx.input_specs[3] is not None else {1, 2}
    return Kernel(run, f"native:qlinear@{ctx.isa}", frozenset(held), fresh_output=True)
