"""qlinear (int8) on the CPU. Factories in preference order: native_amx (our AMX tile GEMM or our oneDNN matmul,
as each layer's first calls measure them), onednn_direct (our oneDNN matmul per layer and row count, VNNI and up),
torch_onednn (torch's oneDNN int8 operator, VNNI and up), then native (our exact int8 GEMM, every level from avx2);
the op's reference runs when all decline.

native_amx:
  int8_gemm's arithmetic on AMX tiles (int8_amx_gemm, native/kernels/int8_gemm/: tdpbusd, exact int32 sums of
  (a - zero point) * w, then int8_gemm's epilogue, bit for bit) for up to linear.AMX_MAX_ROWS rows, where the layer's
  own first calls in the model measure it faster than onednn_direct's matmul (_in_situ.py, as bf16 linear layers
  choose); onednn_direct's otherwise and for more rows. n and k multiples of 32 and 64. Why: the 48 linears of
  BERT-base int8 (85 MB of weights) took 0.86 x oneDNN's time at 128 rows, 0.85 at 256, 0.93 at 64, parity at 1024
  on 2 cores of an AMX Xeon (benchmarks/int8_amx_gemm.py, session 68); with the weights in L3 (12 copies of a layer
  cycled) parity, except the FC1 layers, whose erf GELU costs less here. IPEXCONVERT_AMX_GEMM=0 turns it off.

onednn_direct:
  qlinear on a direct oneDNN matmul primitive kept per layer and row count (ipexconvert.backends.cpu.onednn_direct):
  uint8 activations, int8 weights with per-output-feature scales, bias, the first unary post-op and
  a constant per-feature mul after it (a SmoothQuant multiplier fold_requantize moved here) fused;
  uint8, bfloat16 or float32 output. Other post-ops run in torch after the call, which a uint8
  output cannot take: such nodes go on to torch_onednn_qlinear.py.

  Measured against torch.ops.onednn.qlinear_pointwise at BERT-base shapes, 2 threads, same process
  (docs/native.md): 0.75-0.90 of its time at 128 rows, 0.4 at 1 row, where torch's per-call setup
  dominates.

torch_onednn:
  qlinear through oneDNN int8 (VNNI/AMX): weight packed once at load, bias and one unary post-op fused.

  torch.ops.onednn.qlinear_pointwise takes the uint8 activation with its per-tensor scale and
  zero point, the packed int8 weight with per-channel scales, and returns float32, bfloat16
  or (requantized) uint8. Post-ops beyond the first unary run in torch after the call; a uint8
  node with such a tail (a SmoothQuant multiplier folded in by fold_requantize) computes in
  float32 and is quantized after the tail.

native:
  qlinear on the native exact int8 GEMM, below avx512_vnni (see _int8_gemm.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from ....ir import dtypes
from ....ir.ops._quant import quantize
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import onednn_direct
from ..self_check import torch_ops
from ._int8_gemm import Int8Gemm, runs_here
from .linear import amx_bind, amx_tiles_or
from ._onednn_direct_linear import fused_prefix, linear_bind, linear_run
from ._torch_onednn import plan_post_ops, qlinear_setup, with_tail
from . import _runs_at

def fold_input_zero_point(weight: torch.Tensor, scales: torch.Tensor, bias: Optional[torch.Tensor], x_scale: float,
                          x_zero_point: int) -> tuple[Optional[torch.Tensor], int]:
    """(bias, input zero point) for the primitive, with the zero point folded into the bias.

    x_scale * sum_k (q_x - zp) * w_scale[n] * q_w[n, k] + bias[n] is the zero-point-free product plus
    bias[n] - x_scale * w_scale[n] * zp * sum_k q_w[n, k], a constant per output. oneDNN then skips its
    per-call zero-point compensation: 0.94-0.995 of the time at BERT-base shapes, same process, same
    error against a float64 reference (docs/native.md). The uncentred int32 sums (at most
    3072 * 255 * 127 here) round to fp32 with an error far below the quantization noise."""
    if not x_zero_point:
        return bias, 0
    shift = x_scale * scales.double() * x_zero_point * weight.double().sum(dim=1)
    return ((0.0 if bias is None else bias.double()) - shift).float().contiguous(), 0


def _check_constants(ctx: NodeContext) -> None:
    """The weight [N, K], its scales and bias [N] as the specs declare them, K the input's last dim
    and N the output's (onednn_direct.check_constant)."""
    x, out, weight = ctx.input_specs[0], ctx.output_specs[0], ctx.constants[1]
    onednn_direct.check_constant("onednn_direct:qlinear", ctx, 1, "weight", [onednn_direct.static(out.shape[-1]), onednn_direct.static(x.shape[-1])])
    for slot, what in ((2, "w_scales"), (3, "bias")):
        if ctx.input_specs[slot] is not None:
            onednn_direct.check_constant("onednn_direct:qlinear", ctx, slot, what, [weight.shape[0]])


@register_kernel("cpu", "qlinear", runs_at=_runs_at.native_amx_int8_linear)
def native_amx_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """int8_gemm's arithmetic on AMX tiles (int8_amx_gemm) up to AMX_MAX_ROWS rows where the layer's first calls in
    the model measure it faster than our oneDNN int8 matmul (onednn_direct_qlinear, which runs otherwise and for
    more rows). Declines what either declines, and sizes that are not multiples of 32 (n) and 64 (k)."""
    weight = ctx.constants[1]
    if (not runs_here(ctx, _runs_at.native_amx_int8_linear) or weight is None or weight.dim() != 2
            or ctx.input_specs[0].rank < 2):
        return None
    onednn = onednn_direct_qlinear(ctx)
    gemm = Int8Gemm.build(ctx, weight, amx=True) if onednn is not None else None
    if gemm is None:
        return None
    held = onednn.consumed_inputs  # constants neither way reads from the inputs at run time
    operands = {p.operand for p in gemm.tail if p.operand is not None} | {gemm.residual} - {None}
    if operands & held:
        return None
    run, choice = amx_tiles_or(gemm.k, _over_rows(gemm), onednn.fn)
    # the name says what may run: measured, a layer keeps either (profiles group its time under this name)
    name = "native:int8_amx_gemm" if choice is None else "native:int8_amx_gemm|onednn_direct:qlinear"
    return Kernel(run, name, held, fresh_output=True, bind=amx_bind(gemm.k, choice, _over_rows_bind(gemm), onednn.bind))


@register_kernel("cpu", "qlinear", runs_at=_runs_at.onednn_direct_int8)
def onednn_direct_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """Our oneDNN int8 matmul per layer and row count: input zero point folded into the bias at load, bias and one
    unary post-op (and a SmoothQuant per-feature mul) fused; uint8 / bf16 / fp32 out."""
    setup = qlinear_setup(ctx)
    if setup is None or not onednn_direct.usable(ctx.isa):
        return None
    (weight, scales, bias), _ = setup
    a = ctx.attrs
    _check_constants(ctx)
    fused = fused_prefix(a.post_ops, ctx.constants, weight.shape[0])
    if fused.tail and a.output_dtype == "uint8":
        return None
    bias, x_zero_point = fold_input_zero_point(weight, scales, bias, a.x_scale, a.x_zero_point)
    linear = onednn_direct.make_layer("onednn_direct:qlinear", onednn_direct.raw.Linear, weight.contiguous(), scales, bias, "uint8",
                             a.output_dtype, post_op=fused.unary, multiplier=fused.multiplier, x_scale=a.x_scale,
                             x_zero_point=x_zero_point, y_scale=a.output_scale, y_zero_point=a.output_zero_point)
    run = linear_run(linear, dtypes.to_torch(a.output_dtype), fused.tail, "onednn_direct:qlinear")
    held = {1, 2, 3} if fused.multiplier_slot is None else {1, 2, 3, fused.multiplier_slot}
    return Kernel(run, "onednn_direct:qlinear", frozenset(held), fresh_output=True,
                  bind=linear_bind(linear, dtypes.to_torch(a.output_dtype), fused.tail))


@register_kernel("cpu", "qlinear", runs_at=_runs_at.torch_onednn_int8)
def torch_onednn_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """torch's onednn.qlinear_pointwise: uint8 in, float32 / bfloat16 / requantized uint8 out; post-ops beyond the
    first unary in torch (a uint8 node with such a tail computes float32 and quantizes after it)."""
    setup = qlinear_setup(ctx)
    prepack = torch_ops.op_for("onednn.qlinear_prepack", "int8")
    qlinear = torch_ops.op_for("onednn.qlinear_pointwise", "int8")
    if setup is None or prepack is None or qlinear is None or ctx.input_specs[0].rank < 2:
        return None
    (weight, scales, bias), out_dtype = setup
    a = ctx.attrs
    plan = plan_post_ops(a.post_ops, lambda p: False, frozenset())
    packed = prepack(weight.contiguous(), None)
    zero_points = torch.zeros(weight.shape[0], dtype=torch.int64)
    attr, algorithm = plan.unary or ("none", "")
    requantize_after_tail = bool(plan.tail) and out_dtype is None
    call_dtype = torch.float32 if requantize_after_tail else out_dtype
    out_scale, out_zero_point = (1.0, 0) if requantize_after_tail else (a.output_scale, a.output_zero_point)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return qlinear(inputs[0], a.x_scale, a.x_zero_point, packed, scales, zero_points, bias,
                       out_scale, out_zero_point, call_dtype, attr, [], algorithm)

    fused = with_tail(run, plan.tail)
    if not requantize_after_tail:
        return Kernel(fused, "torch_onednn:qlinear", frozenset({1, 2, 3}))

    def requantized(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return quantize(fused(inputs, dims), a.output_scale, a.output_zero_point, a.output_dtype)

    return Kernel(requantized, "torch_onednn:qlinear", frozenset({1, 2, 3}))


@register_kernel("cpu", "qlinear", runs_at=_runs_at.native_int8_gemm)
def native_qlinear(ctx: NodeContext) -> Optional[Kernel]:
    """Our exact int8 GEMM below VNNI (activations minus their zero point and weights widened to int16, vpmaddwd
    into int32); scale, bias, a residual, relu, an erf GELU, the next layer's SmoothQuant factors and the output
    dtype fused."""
    if not runs_here(ctx) or ctx.constants[1] is None or ctx.constants[1].dim() != 2:
        return None
    gemm = Int8Gemm.build(ctx, ctx.constants[1])
    if gemm is None:
        return None
    held = ({1, 2, 3} if ctx.input_specs[3] is not None else {1, 2}) | ({gemm.multiplier_slot} - {None})
    return Kernel(_over_rows(gemm), f"native:qlinear@{ctx.isa}", frozenset(held), fresh_output=True,
                  bind=_over_rows_bind(gemm))


def _over_rows(gemm: Int8Gemm):
    """The kernel function of a linear layer on `gemm`: x's leading dims as rows, the post-ops gemm did not take
    after it."""
    k, n = gemm.k, gemm.n

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.reshape(-1, k)
        rows = rows if rows.stride(-1) == 1 else rows.contiguous()
        y = gemm(rows, rows.shape[0], inputs, lambda r: r.reshape(-1, n)).view(*x.shape[:-1], n)
        return gemm.finish(y, inputs)

    return run


def _over_rows_bind(gemm: Int8Gemm):
    """Kernel.bind of _over_rows(gemm)'s function: its one kernel call into an output made once, where gemm takes
    every post-op and x's rows are x itself."""
    k, n = gemm.k, gemm.n

    def bind(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        rows = x.reshape(-1, k)
        if rows.stride(-1) != 1 or rows.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
            return None
        bound = gemm.bind(rows, rows.shape[0], inputs, lambda r: r.reshape(-1, n))
        if bound is None:
            return None
        call, out = bound
        return call, [out.view(*x.shape[:-1], n)]

    return bind
