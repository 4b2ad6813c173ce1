"""woq_linear (int8 / int4 weights, float activations) on the CPU: our native woq_gemm kernel
(native/kernels/woq_gemm, generic / avx2 / avx512 builds), else the op's reference.

The artifact keeps the plain codes, scales and zero points (ir/ops/woq_linear.py); the factory packs
them once at load into the kernel's layout (pack_woq_weight; native/kernels/woq_gemm/args.h) and
holds the packed copies, so the executor frees the originals. The kernel adds the bias; post-ops
run after it in torch, in place on its fresh float32 output. Layers whose op rounds x to int8
(activations "int8") run integer dot products: 8-bit weights through path 4 (woq_gemm_w8a8, AVX2 and
up, every row count; codes packed in k-quads), 4-bit weights through path 5 (woq_gemm_w4a8, AVX-512
VNNI, every row count; codes in k-octets), or on AVX2 path 3 for decode rows and the float paths on the
rounded rows for longer inputs. Both integer paths turn a row holding NaN or infinity into NaN
outputs, as the op's meaning does.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from ....ir.ops.woq_linear import round_rows_to_int8
from ....ir.postops import BINARY_POST_OPS, UNARY_POST_OPS
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import native_lib
from . import _runs_at
from ._native import kernel_name

_BLOCK = 16  # output channels per packed block
_INT8_DECODE_ROWS = 4  # rows up to which int8 activations run woq_gemm's integer decode path (path 3)


def pack_woq_weight(codes: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor], bits: int,
                    group_size: int, integer_layout: bool = False) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(packed codes, packed scales and zero points, whether any zero point is not 0) in woq_gemm's layout:
    codes [n16 / 16, K or K / 2, 16] (the 16 channels of a block side by side for each k, or pair of k);
    with integer_layout, the layouts of the integer paths (args.h): 8-bit codes in k-quads [n16 / 16, K / 4,
    16, 4] (path 4), 4-bit codes in k-octets [n16 / 16, K / 8, 16, 4], byte b = code(8o + b) | code(8o + 4 + b)
    << 4 (path 5); qparams float32 [n16 / 16, groups, 2, 16] (scales, then zero points), or for symmetric codes
    (no zero points) [n16 / 16, groups, 1, 16], the scales alone (the kernel takes the symmetric zero, 8 for 4-bit
    codes: a decode step reads 4 bytes fewer per channel and group); channels padded to 16 with zeros."""
    n, cols = codes.shape
    groups = scales.shape[1]
    n16 = -(-n // _BLOCK) * _BLOCK
    padded = codes.contiguous()
    if n16 != n or padded.storage_offset() % 4:  # (the integer layouts read the rows as int32 words)
        padded = torch.zeros((n16, cols), dtype=codes.dtype)
        padded[:n] = codes
    if integer_layout:
        # a k-quad (8-bit) or k-octet (4-bit) of a channel is 4 bytes: the blocks transposed as int32 words
        words = padded.view(torch.int32).view(n16 // _BLOCK, _BLOCK, cols // 4).transpose(1, 2)
        words = words.clone(memory_format=torch.contiguous_format)  # (a copy even where the view is contiguous)
        if bits == 4:
            _octet_nibbles_(words)
        packed = words.view(padded.dtype).view(n16 // _BLOCK, cols // 4, _BLOCK, 4)
    else:
        packed = padded.view(n16 // _BLOCK, _BLOCK, cols).transpose(1, 2).contiguous()
    planes = 1 if zero_points is None else 2
    qparams = torch.zeros((n16, groups, planes), dtype=torch.float32)
    qparams[:n, :, 0] = scales.float()
    if zero_points is not None:
        qparams[:n, :, 1] = zero_points.float()
    qparams = qparams.view(n16 // _BLOCK, _BLOCK, groups, planes).permute(0, 2, 3, 1).contiguous()
    return packed, qparams, bits == 4


def _octet_nibbles_(words: torch.Tensor) -> None:
    """In place, each int32 word of 8 codes as the bytes hold them (nibbles from the low end: code 8o .. 8o + 7, k
    even in a byte's low nibble) -> path 5's octet (nibbles 8o, 8o + 4, 8o + 1, 8o + 5, ...: byte b = code(8o + b) |
    code(8o + 4 + b) << 4): bytes 1 and 2 swapped, then the middle nibbles of each half (a perfect shuffle)."""
    moved = torch.empty_like(words)
    for mask, shift in ((0x0000FF00, 8), (0x00F000F0, 4)):
        torch.bitwise_right_shift(words, shift, out=moved)
        moved.bitwise_xor_(words).bitwise_and_(mask)  # the bits to swap, at their lower place
        words.bitwise_xor_(moved)
        words.bitwise_xor_(moved.bitwise_left_shift_(shift))


# Integer paths of woq_gemm for layers with int8 activations: path -> (native kernel, bits, k and group multiple).
_INTEGER_PATHS = {4: ("woq_gemm_w8a8", 8, 4), 5: ("woq_gemm_w4a8", 4, 8)}


def _integer_path(codes: torch.Tensor, k: int, bits: int, group_size: int, isa: str) -> Optional[int]:
    """The integer path (4 or 5) that runs this layer at this ISA level, or None (4-bit on AVX2: path 3 for
    decode, the float paths on rounded rows otherwise)."""
    for path, (kernel, path_bits, multiple) in _INTEGER_PATHS.items():
        if bits == path_bits and k % multiple == 0 and group_size % multiple == 0 \
                and native_lib.kernel_level(kernel, isa) != "none":
            # path 4's AVX2 build moves x's sign onto the code: a code of -128 (outside the quantizer's range,
            # possible only in a hand-made artifact) would overflow, so such a layer takes the float paths.
            if bits == 8 and int(codes.min()) == -128:
                return None
            return path
    return None


_IN_PLACE_UNARY = {"relu": torch.relu_, "silu": lambda y: F.silu(y, inplace=True), "sigmoid": torch.sigmoid_,
                   "tanh": torch.tanh_}


def _post_ops_in_place(y: torch.Tensor, post_ops, inputs: list) -> torch.Tensor:
    """The node's post-ops on the kernel's fresh float32 output: in place where torch has the op (binary
    operands broadcast to y without growing it: the loader checked that)."""
    for p in post_ops:
        if p.operand is None:
            y = _IN_PLACE_UNARY[p.kind](y) if p.kind in _IN_PLACE_UNARY else UNARY_POST_OPS[p.kind](y)
        else:
            operand = inputs[p.operand]
            operand = operand.float() if operand.is_floating_point() and operand.dtype != torch.float32 else operand
            BINARY_POST_OPS[p.kind](y, operand, out=y)
    return y


@dataclass
class WoqGemm:
    """One layer's packed weight and the call."""

    packed: torch.Tensor
    qparams: torch.Tensor
    has_zero: bool
    bias: Optional[torch.Tensor]
    n: int
    k: int
    bits: int
    group_size: int
    isa: str

    int8_activations: bool = False
    integer_decode: bool = False  # woq_gemm's path 3 has a build at this level (AVX2 and up)
    integer_path: Optional[int] = None  # 4 or 5: the codes are packed for that path, which runs every call

    def native_path(self, rows: torch.Tensor) -> Optional[int]:
        """woq_gemm's path for these rows; None when torch rounds them to int8 first (the float paths)."""
        if self.int8_activations and self.integer_path is None:
            if self.integer_decode and self.bits == 4 and rows.numel() <= _INT8_DECODE_ROWS * self.k:
                return 3  # the integer decode path (4-bit codes) rounds each row itself
            return None
        return self.integer_path or 0

    def __call__(self, rows: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """rows: float32 [..., k] (contiguous, or 2-D with strided rows) -> float32 [..., n] (+ residual, float32
        of that shape, contiguous)."""
        out = torch.empty((*rows.shape[:-1], self.n), dtype=torch.float32)
        path = self.native_path(rows)
        if path is None:
            rows, path = round_rows_to_int8(rows.reshape(-1, self.k)).view(rows.shape), 0  # float paths, rounded rows
        native_lib.raw.woq_gemm(rows, self.packed, self.n, self.bits, self.group_size, self.qparams, self.has_zero,
                                self.bias, out, self.isa, torch.get_num_threads(), path, residual)
        return out

    def bind(self, rows: torch.Tensor, residual: Optional[torch.Tensor] = None):
        """(the native call with every argument made once, its output) as Kernel.bind wants; None when the rows
        would be rounded by torch first."""
        path = self.native_path(rows)
        if path is None:
            return None
        out = torch.empty((*rows.shape[:-1], self.n), dtype=torch.float32)
        return functools.partial(native_lib.raw.woq_gemm, rows, self.packed, self.n, self.bits, self.group_size,
                                 self.qparams, self.has_zero, self.bias, out, self.isa, torch.get_num_threads(), path,
                                 residual), out


@register_kernel("cpu", "woq_linear", runs_at=_runs_at.native_kernel("woq_gemm"))
def native_woq_linear(ctx: NodeContext) -> Optional[Kernel]:
    """Our int8 / int4 weight-only GEMM: decode rows dequantized in registers, prefill through per-thread
    float32 panels; bias fused, post-ops after it in place. bfloat16 activations are widened to float32."""
    x_spec = ctx.input_specs[0]
    if ctx.device != "cpu" or x_spec is None or x_spec.dtype not in ("float32", "bfloat16") \
            or ctx.attrs.bits not in (4, 8):
        return None  # (bits 16, bf16 weights, are made at load by the GPU backend alone)
    codes, scales, zero_points, bias = ctx.constants[1:5]
    if codes is None or scales is None or (ctx.input_specs[3] is not None and zero_points is None) \
            or (ctx.input_specs[4] is not None and bias is None):
        return None  # the weights are not constants (never written by the pass): the reference runs
    a = ctx.attrs
    n = codes.shape[0]
    k = codes.shape[1] * (2 if a.bits == 4 else 1)
    int8_activations = a.activations == "int8"
    integer_path = _integer_path(codes, k, a.bits, a.group_size, ctx.isa) if int8_activations else None
    packed, qparams, has_zero = pack_woq_weight(codes, scales, zero_points, a.bits, a.group_size,
                                                integer_layout=integer_path is not None)
    gemm = WoqGemm(packed, qparams, has_zero, None if bias is None else bias.float().contiguous(), n, k, a.bits,
                   a.group_size, ctx.isa, int8_activations=int8_activations,
                   integer_decode=native_lib.kernel_level("woq_gemv_i8", ctx.isa) != "none", integer_path=integer_path)
    post_ops = list(a.post_ops)
    # A leading residual add (a decoder's o / down projection) is summed by the native call itself: each torch
    # call costs microseconds in a decode step, whose streamed weights have evicted torch's own state.
    residual = post_ops[0].operand if post_ops and post_ops[0].kind == "add" and post_ops[0].operand is not None \
        and ctx.input_specs[post_ops[0].operand].shape == ctx.output_specs[0].shape else None
    later_post_ops = post_ops[1:] if residual is not None else post_ops

    def run(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        if x.dtype == torch.float32 and x.is_contiguous():
            rows = x
        else:  # bf16 activations: float32 at the kernel boundary for now (a bf16 load path would save this copy)
            rows = x.float().contiguous()
        add = None
        if residual is not None:
            add = inputs[residual]
            if add.dtype != torch.float32 or not add.is_contiguous():
                add = add.float().contiguous()
        y = _post_ops_in_place(gemm(rows, add), later_post_ops, inputs)
        return y if x.dtype == torch.float32 else y.to(x.dtype)

    def bind(inputs: list, dims: dict[str, int]):
        x, add = inputs[0], None if residual is None else inputs[residual]
        if later_post_ops or not all(t is None or (t.dtype == torch.float32 and t.is_contiguous()) for t in (x, add)):
            return None
        bound = gemm.bind(x, add)
        return None if bound is None else (bound[0], [bound[1]])

    held = {1, 2} | {i for i in (3, 4) if ctx.input_specs[i] is not None}
    kernel = _INTEGER_PATHS[integer_path][0] if integer_path else "woq_gemm"
    return Kernel(run, kernel_name("woq_linear", kernel, ctx.isa), frozenset(held), fresh_output=True, bind=bind)
