"""woq_linear on the GPU. Factories in preference order:

triton: up to MAX_ROWS rows of x (a decode step's tokens) times the quantized weight in one Triton kernel
(_triton_jit.woq_rows): the codes read as stored, as int32 words (int4 two a byte, int8), (q - zero) * x summed
per run of a group and scaled, never forming the float weight; int8 activations rounded per row inside it; the
bias and post-ops (residual add, SiLU, the gate product) in the same pass. k is split among programs (about
Tile.programs a call) and the last program of a column block adds the partial sums in a fixed order. Runs of
fewer than a word of codes (int4 groups not a multiple of 8) and more rows (a prompt) run the reference, which
dequantizes the weight once per call and multiplies on cuBLAS in float32."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ....ir.ops.woq_linear import SYMMETRIC_INT4_ZERO, WoqLinearOp
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing
from ._triton_int8 import _as_rows, post_op_codes

MAX_ROWS = 4


@dataclass(frozen=True)
class Tile:
    block_n: int  # output columns a program computes
    chunk: int  # the unit of the k a program reads (whole runs of at most 128 inside one group)
    warps: int
    programs: int  # about this many programs a call, the k inputs split among them: a GEMV at batch 1 is bound
                   # by the bytes in flight, and one program per column block leaves most of the GPU waiting


# Per activations kind (rounding x to int8 costs a division per element, so those programs take more columns).
# From benchmarks/gpu_woq_sweep.py on an H200 (benchmarks/results/session27-gpu-woq-sweep-*-h200.log, summarized in
# session27-gpu-decode-tinyllama-h200.md).
TILES = {"float": Tile(block_n=128, chunk=128, warps=4, programs=512),
         "int8": Tile(block_n=64, chunk=256, warps=2, programs=512)}


def k_split_for(n: int, k: int, chunk: int, block_n: int, programs: int) -> int:
    """The inputs each program reads: whole chunks, as few splits of k as give about `programs` programs."""
    def cdiv(a: int, b: int) -> int:
        return -(-a // b)

    splits = max(1, min(cdiv(k, chunk), round(programs / cdiv(n, block_n))))
    return cdiv(cdiv(k, splits), chunk) * chunk


def run_length(group_size: int) -> int:
    """The longest power-of-two run of k (at most 128) that lies inside one group wherever a group starts."""
    run = 1
    while run < 128 and group_size % (run * 2) == 0:
        run *= 2
    return run


@register_kernel("cuda", "woq_linear", runs_at=triton_missing)
def triton_woq_linear(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    codes, scales, zeros, bias = ctx.constants[1:5]
    if codes is None or scales is None or (ctx.input_specs[3] is not None and zeros is None) \
            or (ctx.input_specs[4] is not None and bias is None):
        return None  # computed weights: the reference
    fitted = post_op_codes(attrs.post_ops)
    run_k = run_length(attrs.group_size)
    codes = codes.contiguous()
    if fitted is None or run_k < 32 // attrs.bits or codes.storage_offset() % 4:
        return None  # a run must fill whole int32 words of codes (8 int4 or 4 int8 codes), words aligned
    import triton  # (runs_at has said it is here)

    post, operand_slots = fitted
    n, k = scales.shape[0], scales.shape[1] * attrs.group_size
    tile = TILES[attrs.activations]  # (read once: the sweep changes the table between factories)
    block_n = tile.block_n
    k_split = k_split_for(n, k, run_k * max(1, min(tile.chunk, k) // run_k), block_n, tile.programs)
    splits = -(-k // k_split)
    blocks = triton.cdiv(n, block_n)
    # split partial sums and a ticket per column block and row: the last program of a block resets its ticket,
    # so they stay zero between calls (one call at a time: a plan's runs are serialized, graphs.py)
    work = torch.empty(splits * MAX_ROWS * n if splits > 1 else 1, dtype=torch.float32, device=codes.device)
    tickets = torch.zeros(MAX_ROWS * blocks, dtype=torch.int32, device=codes.device)
    scales, zeros = scales.float().contiguous(), None if zeros is None else zeros.contiguous()
    bias = None if bias is None else bias.float().contiguous()
    words = codes.view(torch.int32)  # k is a multiple of the run: whole words per row
    reference = WoqLinearOp.compile(attrs)
    zero = SYMMETRIC_INT4_ZERO if attrs.bits == 4 else 0
    code_mask = ((1 << attrs.bits) - 1) << (19 if attrs.bits == 4 else 15)  # where woq_rows moves a code

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.numel() // k if k else 0
        if rows == 0 or rows > MAX_ROWS:
            return reference([x, codes, scales, zeros, bias, *inputs[5:]], dims)
        out_shape = (*x.shape[:-1], n)
        flat = x.reshape(rows, k).contiguous()
        out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
        operands = [_as_rows(inputs[i], out_shape, rows, n) for i in operand_slots]
        a = operands[0] if operands else out
        b = operands[1] if len(operands) > 1 else out
        _triton.jit().woq_rows[(blocks, splits, rows)](
            flat, words, scales, scales if zeros is None else zeros, scales if bias is None else bias, a, b, out,
            work, tickets, n, k, scales.shape[1], attrs.group_size, k_split, splits, code_mask,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            BITS=attrs.bits, ZERO=zero, HAS_ZEROS=zeros is not None, HAS_BIAS=bias is not None,
            INT8_ROWS=attrs.activations == "int8", HAS_A=len(operands) > 0, HAS_B=len(operands) > 1,
            P0=post[0], P1=post[1], P2=post[2], P3=post[3], RUN=run_k,
            BLOCK_N=block_n, SPLIT=splits > 1, num_warps=tile.warps)
        return out.view(out_shape)

    return Kernel(run, "triton:woq_linear_rows", frozenset({1, 2, 3, 4}), fresh_output=True)

