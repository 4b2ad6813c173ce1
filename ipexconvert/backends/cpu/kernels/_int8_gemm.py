"""What the native int8 GEMM kernels (qlinear, qconv2d) share: when they run, the packed weight
and folded scales, which post-ops the kernel fuses, and the call.

They run where oneDNN's int8 does not: below avx512_vnni, oneDNN's u8 x s8 products saturate
(kernels/_torch_onednn.int8_allowed), so without these every int8 layer ran its float
reference. The kernel (native/kernels/int8_gemm/int8_gemm.cpp) widens to int16 and sums exactly.

The kernel's epilogue fuses scale and bias, a residual add (uint8 codes dequantized, or float32)
and a relu, in the orders [relu], [add], [add, relu], then an erf GELU (a transformer FFN's first
layer), then a multiply by a constant per-column vector (the next layer's SmoothQuant factors, which
fold_requantize puts there), then writes the output dtype. Other post-op chains (a tanh GELU, operands
that are not constant per column) get a float32 result and run the rest natively (tanh GELU) or in
torch, then the native quantize kernel (the quantize formula of ir/ops/_quant.py, bit for bit).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import torch

from ....ir.dtypes import to_torch
from ....ir.postops import apply_post_ops
from ....runtime.bound_plan import buffer
from ....runtime.kernels import NodeContext
from .. import native_lib
from . import _runs_at
from ._native import dense_view
from ._torch_onednn import int8_weight_params

_OUT_DTYPES = ("float32", "bfloat16", "uint8", "int8")


def runs_here(ctx: NodeContext, runs_at=None) -> bool:
    """A native int8 GEMM takes this node: it can run at this level (`runs_at`, by default
    _runs_at.native_int8_gemm: built, avx2 up to where oneDNN's int8 runs; int8_amx_gemm's is
    _runs_at.native_amx_int8_linear), uint8 activations and a supported output dtype."""
    if ctx.device != "cpu" or (runs_at or _runs_at.native_int8_gemm)(ctx.isa) is not None:
        return False
    return ctx.input_specs[0].dtype == "uint8" and ctx.attrs.output_dtype in _OUT_DTYPES


def _fused_prefix(post_ops) -> tuple[Optional[int], bool, int]:
    """(residual operand index or None, relu, how many post-ops the kernel takes)."""
    kinds = [(p.kind, p.operand) for p in post_ops]
    if kinds[:1] == [("relu", None)]:
        return None, True, 1
    if kinds and kinds[0][0] == "add" and kinds[0][1] is not None:
        relu = len(kinds) > 1 and kinds[1] == ("relu", None)
        return kinds[0][1], relu, 2 if relu else 1
    return None, False, 0


def pack_int8_weight(weight: torch.Tensor) -> torch.Tensor:
    """An int8 weight [n, k] in int8_gemm's layout: int16 [n16 / 16, k2 / 2, 16, 2] (n rounded up to
    16, k to 2, zero padded), the two weights of a pair of k side by side for each of 16 outputs."""
    if weight.dtype != torch.int8 or weight.dim() != 2:
        raise ValueError(f"weight must be a 2-D int8 tensor, got {weight.dtype} {tuple(weight.shape)}")
    n, k = weight.shape
    n16, k2 = -(-n // 16) * 16, -(-k // 2) * 2
    padded = torch.zeros(n16, k2, dtype=torch.int16)
    padded[:n, :k] = weight
    return padded.view(n16 // 16, 16, k2 // 2, 2).permute(0, 2, 1, 3).contiguous()


def pack_int8_amx_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An int8 weight [n, k] (n and k multiples of 32 and 64) in int8_amx_gemm's layout and its row sums: int8
    [n / 32, k / 64, 16, 32, 4], per block of 32 outputs and 64 k the 16 quads of k with the 32 outputs side by
    side (a tdpbusd B tile is 16 of their 64-byte halves), and int32 [n] sums over k (for the input zero point)."""
    if weight.dtype != torch.int8 or weight.dim() != 2 or weight.shape[0] % 32 or weight.shape[1] % 64:
        raise ValueError(f"weight must be a 2-D int8 tensor [32 a, 64 b], got {weight.dtype} {tuple(weight.shape)}")
    n, k = weight.shape
    packed = weight.reshape(n // 32, 32, k // 64, 16, 4).permute(0, 2, 3, 1, 4).contiguous()
    return packed, weight.sum(dim=1, dtype=torch.int32).contiguous()


def _column_factors(ctx: NodeContext, post_op, n: int) -> Optional[torch.Tensor]:
    """A `mul` post-op's operand as n float32 factors, one per output column, when it is a constant of that
    shape ([n] or [1, ..., 1, n]): the epilogue takes it. None: the torch tail does."""
    if post_op.kind != "mul" or post_op.operand is None:
        return None
    factors = ctx.constants[post_op.operand]
    if factors is None or not factors.is_floating_point() or factors.numel() != n or factors.shape[-1] != n:
        return None
    return factors.detach().float().reshape(n).contiguous()


@dataclass
class Int8Gemm:
    """One layer: weight [n, k] packed once, scales x_scale * w_scale folded, the post-ops split
    between the kernel's epilogue and a torch tail."""

    packed: torch.Tensor
    n: int
    k: int
    scales: torch.Tensor
    bias: Optional[torch.Tensor]
    relu: bool
    residual: Optional[int]  # input index of the fused residual add
    residual_quant: Optional[tuple[float, int]]  # (scale, zero point) of a uint8 residual
    gelu: bool  # an erf GELU right after those, in the kernel's epilogue
    gelu_tanh: bool  # a tanh GELU right after those, by the native gelu kernel on the float32 result
    multiplier: Optional[torch.Tensor]  # n float32 factors after the GELU, in the kernel's epilogue
    tail: list  # the post-ops after those (run in torch on a float32 result)
    attrs: object
    isa: str
    w_sums: Optional[torch.Tensor] = None  # set: packed for int8_amx_gemm (pack_int8_amx_weight), which runs it
    multiplier_slot: Optional[int] = None  # the input the multiplier came from (a constant the kernel holds)

    @classmethod
    def build(cls, ctx: NodeContext, weight_2d: torch.Tensor, residual_quant=None,
              amx: bool = False) -> Optional["Int8Gemm"]:
        """amx: for int8_amx_gemm (n and k multiples of 32 and 64: None otherwise), else for int8_gemm."""
        params = int8_weight_params(ctx)
        if params is None:
            return None
        _, w_scales, bias = params
        a = ctx.attrs
        n, k = weight_2d.shape
        if k > 65536 or w_scales.numel() != n or (bias is not None and bias.numel() != n):
            return None
        if amx and (n % 32 or k % 64):
            return None
        residual, relu, fused = _fused_prefix(a.post_ops)
        if residual is not None and (ctx.input_specs[residual] is None
                                     or ctx.input_specs[residual].shape != list(ctx.output_specs[0].shape)):
            residual, relu, fused = None, False, 0  # a broadcast operand: the torch tail adds it
        scales = (torch.tensor(a.x_scale, dtype=torch.float64) * w_scales.double()).float().contiguous()
        tail = list(a.post_ops[fused:])
        first = tail[0].kind if tail else None
        gelu, gelu_tanh = first == "gelu", first == "gelu_tanh"
        tail = tail[1:] if gelu or gelu_tanh else tail
        multiplier = None if gelu_tanh or not tail else _column_factors(ctx, tail[0], n)
        packed, w_sums = (pack_int8_amx_weight(weight_2d.contiguous()) if amx
                          else (pack_int8_weight(weight_2d.contiguous()), None))
        return cls(packed, n, k, scales, bias, relu, residual, residual_quant if residual is not None else None,
                   gelu, gelu_tanh, multiplier, tail[1:] if multiplier is not None else tail, a, ctx.isa, w_sums,
                   tail[0].operand if multiplier is not None else None)

    def residual_rows(self, inputs: list, to_rows) -> Optional[torch.Tensor]:
        """The residual operand as [m, n] rows (uint8 codes or float32), or None when none is fused."""
        if self.residual is None:
            return None
        r = inputs[self.residual]
        r = r if self.residual_quant is not None or r.dtype == torch.float32 else r.float()
        rows = to_rows(r)
        return rows if rows.stride(-1) == 1 else rows.contiguous()

    def __call__(self, a: torch.Tensor, m: int, inputs: list, to_rows, conv=None) -> torch.Tensor:
        """[m, n]: in the output dtype when every post-op was fused, else float32 for finish().
        a: uint8 rows [m, k], or with conv an NHWC image whose patches are the rows."""
        attrs = self.attrs
        out_dtype = to_torch(attrs.output_dtype) if self.complete else torch.float32
        out = torch.empty((m, self.n), dtype=out_dtype)
        r_scale, r_zp = self.residual_quant or (1.0, 0)
        # the two kernels' arguments after the weight's, the same but for int8_gemm's conv geometry
        epilogue = (self.n, self.scales, self.bias, self.relu, out, attrs.output_scale, attrs.output_zero_point,
                    self.isa, torch.get_num_threads(), self.residual_rows(inputs, to_rows), r_scale, r_zp)
        if self.w_sums is not None:
            native_lib.raw.int8_amx_gemm(a, attrs.x_zero_point, self.packed, self.w_sums, *epilogue, self.gelu,
                                         self.multiplier)
        else:
            native_lib.raw.int8_gemm(a, attrs.x_zero_point, self.packed, *epilogue, conv, self.gelu, self.multiplier)
        if self.gelu_tanh:  # in place on the fresh float32 rows (torch's gelu took ~3 % of BERT-base)
            native_lib.raw.gelu(out, True, out, self.isa, torch.get_num_threads())
        return out

    def bind(self, a: torch.Tensor, m: int, inputs: list, to_rows) -> Optional[tuple]:
        """(call, out): __call__'s kernel call on these rows into an output made once (a bound plan's), or None where
        a post-op is left to finish() or the residual is converted or copied first (not one native call)."""
        if not self.complete:
            return None
        residual = self.residual_rows(inputs, to_rows)
        if residual is not None and (residual.untyped_storage().data_ptr()
                                     != inputs[self.residual].untyped_storage().data_ptr()):
            return None
        attrs = self.attrs
        out = buffer((m, self.n), to_torch(attrs.output_dtype))
        r_scale, r_zp = self.residual_quant or (1.0, 0)
        epilogue = (self.n, self.scales, self.bias, self.relu, out, attrs.output_scale, attrs.output_zero_point,
                    self.isa, torch.get_num_threads(), residual, r_scale, r_zp)
        if self.w_sums is not None:
            return functools.partial(native_lib.raw.int8_amx_gemm, a, attrs.x_zero_point, self.packed, self.w_sums,
                                     *epilogue, self.gelu, self.multiplier), out
        return functools.partial(native_lib.raw.int8_gemm, a, attrs.x_zero_point, self.packed, *epilogue, None,
                                 self.gelu, self.multiplier), out

    @property
    def complete(self) -> bool:
        """The kernel's epilogue takes every post-op: its output is the layer's (finish has nothing to do)."""
        return not self.gelu_tanh and not self.tail

    def finish(self, y: torch.Tensor, operands: list) -> torch.Tensor:
        """The post-ops the kernel did not take, in torch on float32, then the output dtype."""
        if self.complete:
            return y
        attrs = self.attrs
        y = apply_post_ops(y, self.tail, [None if t is None else (t.float() if t.is_floating_point() else t)
                                         for t in operands])
        if attrs.output_dtype in ("uint8", "int8"):  # per tensor: any layout, as long as both share it
            view = dense_view(y)
            x, undo = view if view is not None else (y.contiguous(), lambda q: q)
            codes = torch.empty(x.shape, dtype=to_torch(attrs.output_dtype))
            native_lib.raw.quantize(x, torch.tensor([attrs.output_scale], dtype=torch.float32),
                                torch.tensor([attrs.output_zero_point], dtype=torch.int32), False, codes, self.isa,
                                torch.get_num_threads())
            return undo(codes)
        return y.to(to_torch(attrs.output_dtype))
