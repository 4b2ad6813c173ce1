"""woq_linear on the GPU. Factories in preference order:

triton: up to MAX_ROWS rows of x (a decode step's tokens) times the quantized weight in one Triton kernel
(_triton_jit.woq_rows): the codes read as stored, as int32 words (int4 two a byte, int8), (q - zero) * x summed
per run of a group and scaled, never forming the float weight; with int8 activations (woq_rows_dp4a) x rounded to
its row's int8 grid inside it and multiplied with the codes in integers, four multiply-adds an instruction; the
bias and post-ops (residual add, SiLU, the gate product) in the same pass. k is split among programs (about
Tile.programs a call) and the last program of a column block reads the partial sums in one load and adds them in a
fixed order. Runs of fewer than a word of codes (int4 groups not a multiple of 8) and more rows (a prompt) run the
reference, which dequantizes the weight once per call and multiplies on cuBLAS in float32. On Hopper and later the
kernel launches with programmatic dependent launch (_triton.pdl_enabled): it loads its first codes while the kernel
before it finishes.

prologue_woq_linear (made at load by backends/cuda/prologues.py) runs the same kernel with its rms_norm or
silu_mul applied to x as the kernel reads it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ....ir.ops._common import same_shape
from ....ir.ops.prologue_woq_linear import PrologueWoqLinearOp
from ....ir.ops.rms_norm import effective_eps
from ....ir.ops.silu_mul import halves
from ....ir.ops.woq_linear import FLOAT_BITS, SYMMETRIC_INT4_ZERO, WoqLinearOp
from ....ir.postops import apply_post_ops
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from . import _triton
from ._triton import triton_missing
from ._triton_int8 import _as_rows, post_op_codes
from .rms_norm import MAX_COLUMNS, rms_norm_rows
from .silu_mul import silu_mul_rows

MAX_ROWS = 4
PROLOGUES = {None: 0, "rms_norm": 1, "silu_mul": 2, "attention": 3}  # woq_rows' PROLOGUE
NORMED = ("rms_norm", "silu_mul")  # the prologues of prologue_woq_linear: a sixth input (the norm weight or None)


@dataclass(frozen=True)
class Tile:
    block_n: int  # output columns a program computes
    chunk: int  # the unit of the k a program reads (whole runs of at most 128 inside one group)
    warps: int
    programs: int  # about this many programs a call, the k inputs split among them: a GEMV at batch 1 is bound
                   # by the bytes in flight, and one program per column block leaves most of the GPU waiting


# Per activations kind, from benchmarks/gpu_woq_sweep.py on an H200 (float:
# benchmarks/results/session27-gpu-woq-sweep-*-h200.log, summarized in session27-gpu-decode-tinyllama-h200.md).
TILES = {"float": Tile(block_n=128, chunk=128, warps=4, programs=512),
         "int8": Tile(block_n=128, chunk=128, warps=4, programs=512),
         "bf16": Tile(block_n=128, chunk=128, warps=4, programs=512)}  # bits 16 (float activations): not swept yet


# bf16 weights (bits 16): runs of 64 inputs (32 words a column). TinyLlama bf16 decode on an H200 (session 63,
# benchmarks/results/session63-gpu-decode-bf16.md): runs of 32 1.356 ms a token, 64 1.186 (cuBLAS before: 1.338).
FLOAT_RUN = 64


# Values of x's row a program reads at a time for the row's statistics (rms_norm's sum of squares, int8 activations'
# largest value), all programs first thing after their wait: one dependent trip to L2 a chunk. Read at load.
ROW_CHUNK = 1024
# With programmatic dependent launch, a program asks for the rest of its codes to be brought into L2 before its wait
# (_triton_jit.l2_prefetch), where their alignment allows. Read at load.
L2_PREFETCH = False  # off: TinyLlama int4 decode 0.916 ms a token with both on, 0.899 without (H200, session 58)


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
    """Up to 4 rows (a decode step's tokens) in one Triton kernel (woq_rows): the codes read as int32 words, a
    code turned into a float by a shift and a mask-and-or, k split among ~512 programs and the partial sums added
    in a fixed order by the last one, bias and post-ops in the same pass; int8 activations: x rounded to int8 once a
    program and multiplied in integers, four multiply-adds an instruction (woq_rows_dp4a). More rows: the reference."""
    return woq_rows_kernel(ctx, WoqLinearOp.compile(ctx.attrs), prologue=None)


@register_kernel("cuda", "prologue_woq_linear", runs_at=triton_missing)
def triton_prologue_woq_linear(ctx: NodeContext) -> Optional[Kernel]:
    """The same kernel with the RMSNorm or SiLU gate the GPU joined with the layer at load applied to x as it is
    read (every program reads the row's sum of squares first for RMSNorm; with int8 activations also the row's
    largest prologue value, its int8 step)."""
    if ctx.input_specs[5] is not None and ctx.constants[5] is None:
        return None  # a computed norm weight
    return woq_rows_kernel(ctx, PrologueWoqLinearOp.compile(ctx.attrs), prologue=ctx.attrs.prologue)


def woq_rows_launcher(ctx: NodeContext, prologue: Optional[str]):
    """(launch, the weights as the kernel reads them, the node's own input count, x's row width) for the woq_rows
    kernel of a woq_linear-like node, or None where it does not apply (computed weights, runs of less than a word).
    launch(x, rows, post-op operands, rope, attention) runs it on up to MAX_ROWS rows of x and returns the output;
    rope (the epilogue of woq_linear_rope_kv_write: a RopeWrite) writes q, k and v there instead of the projection;
    attention (prologue "attention", sdpa_woq_linear: an sdpa.SplitPartials) is x of one row, combined as it is read
    (x is then the query: its dtype and batch/row dims)."""
    attrs = ctx.attrs
    codes, scales, zeros, bias = ctx.constants[1:5]
    if codes is None or scales is None or (ctx.input_specs[3] is not None and zeros is None) \
            or (ctx.input_specs[4] is not None and bias is None):
        return None  # computed weights: the reference
    fitted = post_op_codes(attrs.post_ops)
    run_k = run_length(attrs.group_size)
    if attrs.bits == FLOAT_BITS:
        run_k = min(run_k, FLOAT_RUN)  # (read once, at load)
    codes = codes.contiguous()
    if fitted is None or run_k < 32 // attrs.bits or codes.storage_offset() % 4:
        return None  # a run must fill whole int32 words of codes (8 int4, 4 int8 or 2 bf16 codes), words aligned
    if attrs.activations != "float" and (prologue == "attention" or attrs.bits == FLOAT_BITS):
        return None  # (woq_rows_dp4a has no attention prologue and reads integer codes)
    import triton  # (runs_at has said it is here)

    post, operand_slots = fitted
    n, k = scales.shape[0], scales.shape[1] * attrs.group_size
    width = 2 * k if prologue == "silu_mul" else k  # x's row: [gate | up] for silu_mul
    weights = 6 if prologue in NORMED else 5  # the node's own inputs
    norm = ctx.constants[5] if prologue in NORMED else None
    norm = None if norm is None else norm.float().contiguous()
    eps = effective_eps(attrs.eps) if prologue == "rms_norm" else 0.0
    tile = TILES["bf16" if attrs.bits == FLOAT_BITS else attrs.activations]  # (read once: sweeps change the table)
    row_chunk, l2_prefetch = ROW_CHUNK, L2_PREFETCH
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
    per_word = 32 // attrs.bits  # codes a word; k_split is whole runs, so whole words
    k_words, split_words = k // per_word, k_split // per_word
    split_rows = min(32, triton.next_power_of_2(splits))  # partials the last program reads a load
    zero = SYMMETRIC_INT4_ZERO if attrs.bits == 4 else 0
    # where woq_rows moves a code (bf16 weights: unused)
    code_mask = 0 if attrs.bits == FLOAT_BITS else ((1 << attrs.bits) - 1) << (19 if attrs.bits == 4 else 15)
    weight_inputs = [codes, scales, zeros, bias] + ([norm] if prologue is not None else [])
    pdl = _triton.pdl_enabled(codes.device)
    # each column's range of codes 16-byte aligned and a multiple of 16 bytes (l2_prefetch's cp.async.bulk)
    prefetch = (l2_prefetch and pdl and codes.data_ptr() % 16 == 0 and (k // (32 // attrs.bits)) % 4 == 0
                and (k_split // (32 // attrs.bits)) % 4 == 0 and (run_k // (32 // attrs.bits)) % 4 == 0)
    int8_rows = attrs.activations == "int8"
    asm = not _triton.interpreted()  # dp4a as PTX (the interpreter runs none): decided at load, not per call
    # woq_rows_dp4a's x codes (rows x k bytes, stored in the order its words take them)
    x_codes = torch.empty(MAX_ROWS * k if int8_rows else 1, dtype=torch.int8, device=codes.device)

    def launch(x: torch.Tensor, rows: int, post_operands: list, rope, attention=None) -> torch.Tensor:
        out_shape = (*x.shape[:-1], n) if attention is None else (x.shape[0], x.shape[2], n)
        flat = x.reshape(rows, width).contiguous() if attention is None else x
        out = torch.empty((rows, n), dtype=x.dtype, device=x.device) if rope is None else rope.q_out
        operands = [_as_rows(post_operands[i - weights], out_shape, rows, n) for i in operand_slots]
        a = operands[0] if operands else out
        b = operands[1] if len(operands) > 1 else out
        common = dict(BITS=attrs.bits, ZERO=zero, HAS_ZEROS=zeros is not None, HAS_BIAS=bias is not None,
                      HAS_A=len(operands) > 0, HAS_B=len(operands) > 1, P0=post[0], P1=post[1], P2=post[2],
                      P3=post[3], RUN=run_k, BLOCK_N=block_n, SPLIT=splits > 1, SPLIT_ROWS=split_rows,
                      PROLOGUE=PROLOGUES[prologue], HAS_NORM_WEIGHT=norm is not None, GDC=pdl, launch_pdl=pdl,
                      ROW_CHUNK=row_chunk, num_warps=tile.warps)
        side = norm if attention is None else attention.parts  # (the partials take the norm weight's place)
        shared = (flat, words, scales, scales if zeros is None else zeros, scales if bias is None else bias,
                        a, b, out, work, tickets, scales if side is None else side, n, k, k_words, scales.shape[1],
                        attrs.group_size, split_words, splits)
        tail = (width, eps, a.stride(0), a.stride(1), b.stride(0), b.stride(1))
        if int8_rows:
            # (x_codes follows the norm weight, the 11th argument)
            _triton.jit().woq_rows_dp4a[(blocks, splits, rows)](*shared[:11], x_codes, *shared[11:], *tail,
                                                                ASM=asm, **common)
            return out.view(out_shape)
        rope_args = (scales, scales, 0, 0, tickets, scales, scales, 1, 0, 0, 0) if rope is None else rope.args
        kv = (0, 1, 1, 1, 1, 1) if attention is None else (attention.stats, attention.splits, attention.group,
                                                           attention.padded, attention.real, attention.dv)
        _triton.jit().woq_rows[(blocks, splits, rows)](*shared, code_mask, *tail, *rope_args, *kv[:2],
                                                       ROPE_HALF=0 if rope is None else rope.half, KV_GROUP=kv[2],
                                                       KV_SPLITS=kv[3], KV_R=kv[4], KV_DV=kv[5], PREFETCH=prefetch,
                                                       **common)
        return out.view(out_shape) if rope is None else out

    return launch, weight_inputs, weights, width


def float_rows(ctx: NodeContext, prologue: Optional[str], reference):
    """A prompt's rows (more than MAX_ROWS) of a bits-16 layer of unit scales (backends/cuda/float_projections.py) as
    the linear layer ran them before the rewrite: cuBLAS in x's dtype, the bias in it, a residual add as the GEMM's C
    (one rounding, float32 accumulation: the reference's meaning to its double rounding), any other post-ops in x's
    dtype after it (a gate's SiLU, SwiGLU's mul: torch's, as the linear reference runs them), after the GPU's kernel of
    the joined rms_norm or silu_mul. Any other layer: `reference`. callable(inputs, dims), inputs as the node's."""
    attrs = ctx.attrs
    codes, scales, _, bias = ctx.constants[1:5]
    post_ops = attrs.post_ops
    residual_at = post_ops[0].operand if len(post_ops) == 1 and post_ops[0].kind == "add" else None
    residual, out = (ctx.input_specs[residual_at] if residual_at is not None else None), ctx.output_specs[0]
    if residual is None or bias is not None or residual.dtype != out.dtype or not same_shape(residual.shape, out.shape):
        residual_at = None  # (a residual of the output's shape alone is the GEMM's C; other post-ops after it)
    if attrs.bits != FLOAT_BITS or codes is None or scales is None or ctx.input_specs[0].dtype != "bfloat16" \
            or not torch.equal(scales, torch.ones_like(scales)):
        return reference
    weight = codes.contiguous()
    bias = None if bias is None else bias.to(weight.dtype)
    n, k = weight.shape
    norm = ctx.constants[5] if prologue == "rms_norm" else None
    norm = None if norm is None else norm.float().contiguous()
    if prologue == "rms_norm" and (k > MAX_COLUMNS or (ctx.input_specs[5] is not None and norm is None)):
        return reference
    eps = effective_eps(attrs.eps) if prologue == "rms_norm" else 0.0

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if prologue == "rms_norm":  # (the GPU's own kernels of the ops joined: rms_norm.py, silu_mul.py)
            x = rms_norm_rows(x, norm, eps, k, x.dtype)
        elif prologue == "silu_mul":
            x = silu_mul_rows(*halves(x))
        if residual_at is None:
            y = torch.nn.functional.linear(x, weight, bias)
            return apply_post_ops(y, post_ops, inputs) if post_ops else y
        r = inputs[residual_at]
        y = torch.addmm(r.reshape(-1, n), x.reshape(-1, k), weight.t())
        return y.view(*x.shape[:-1], n)

    return run


def woq_rows_kernel(ctx: NodeContext, reference, prologue: Optional[str]) -> Optional[Kernel]:
    """The woq_rows kernel of a woq_linear (prologue None) or a prologue_woq_linear node: its weights (and norm
    weight) are inputs 1-4 (and 5), its post-op operands after them."""
    launcher = woq_rows_launcher(ctx, prologue)
    if launcher is None:
        return None
    launch, weight_inputs, weights, width = launcher

    def referenced(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return reference([inputs[0], *weight_inputs, *inputs[weights:]], dims)

    prompt = float_rows(ctx, prologue, referenced)  # (bits 16: a prompt's GEMM as the linear layer ran it)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.numel() // width if width else 0
        if rows == 0 or rows > MAX_ROWS:
            return prompt(inputs, dims)
        return launch(x, rows, inputs[weights:], None)

    int8_rows = ctx.attrs.activations == "int8"
    name = ("triton:woq_linear_rows" if prologue is None else f"triton:{prologue}_woq_linear_rows") \
        + ("_dp4a" if int8_rows else "")
    return Kernel(run, name, frozenset(range(1, weights)), fresh_output=True)
