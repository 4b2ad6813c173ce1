"""Launching the Triton kernels for int8 layers on the GPU (_triton_jit.py): the int8 GEMM with its epilogue,
the epilogue alone (after torch._int_mm), and quantize.

int8_gemm: codes times int8 weights on the tensor cores (int32 sums, exact), then the epilogue, in one kernel:
no int32 accumulator in memory, no separate flip of uint8 codes (done on the tile as it is loaded), no row
padding for small batches.

epilogue: from the int32 accumulator of an int8 GEMM to the layer's output in one kernel: the zero-point
column term, the per-column scale, the bias, up to four post-ops (relu, gelu, gelu_tanh, silu, sigmoid,
tanh; add/mul of up to two operands broadcast to the output), then the float output dtype or the
requantized codes. The reference (ir/ops/_quant.py finish) takes a dozen kernels for the same.

quantize: float -> uint8/int8 codes, per tensor or with a per-channel multiplier.

All follow the reference's arithmetic (ir/ops/_quant.py quantize; _triton_jit.codes_of): per tensor, x * (1 / scale)
+ zero point computed in float64 and rounded once to float32; with a multiplier, the float32 product; then
rounding half to even and clamping. The rounding is written out in float32 (round_half_even_small, on the value
clamped first, which gives the same codes), since libdevice's rint is not available in Triton's interpreter, in
which these kernels are also tried on the CPU (TRITON_INTERPRET=1).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from ....ir import dtypes
from ....ir.ops._common import window_output_size
from . import _triton

UNARY_CODES = {"relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "sigmoid": 5, "tanh": 6}
BINARY_CODES = {"add": 10, "mul": 12}  # + operand slot (0 or 1)
MAX_POST_OPS = 4
QRANGE = {"uint8": (0, 255), "int8": (-128, 127)}


def post_op_codes(post_ops) -> Optional[tuple[list[int], list[int]]]:
    """(codes, operand node inputs) for the epilogue, or None when the chain does not fit it."""
    codes, operands = [], []
    for p in post_ops:
        if p.operand is None:
            codes.append(UNARY_CODES[p.kind])
        else:
            if p.operand not in operands:
                operands.append(p.operand)
            if len(operands) > 2:
                return None
            codes.append(BINARY_CODES[p.kind] + operands.index(p.operand))
    if len(codes) > MAX_POST_OPS:
        return None
    return codes + [0] * (MAX_POST_OPS - len(codes)), operands


@dataclass(frozen=True)
class EpiloguePlan:
    """What an int8 layer's attrs ask of the Triton epilogue: post-op codes, the node inputs that are their operands,
    requantization ((scale, zero point, dtype), or None for a float output) and the output's torch dtype."""
    codes: list
    operand_slots: list
    quantize: Optional[tuple]
    out_dtype: torch.dtype

    @classmethod
    def of(cls, attrs) -> Optional["EpiloguePlan"]:
        """None when the post-op chain does not fit the epilogue."""
        fused = post_op_codes(attrs.post_ops)
        if fused is None:
            return None
        quantize = ((attrs.output_scale, attrs.output_zero_point, attrs.output_dtype)
                    if attrs.output_dtype in QRANGE else None)
        return cls(fused[0], fused[1], quantize, dtypes.to_torch(attrs.output_dtype))


def inverse_scale(scale: float) -> float:
    """1 / scale in float32, as the reference computes it (then exact in float64)."""
    return float(1.0 / torch.tensor(scale, dtype=torch.float32))


def _as_rows(operand: torch.Tensor, shape: Sequence[int], rows: int, cols: int) -> torch.Tensor:
    """The operand broadcast to the output's shape, as [rows, cols] (strides may be 0: no copy if possible)."""
    return torch.broadcast_to(operand, tuple(shape)).reshape(rows, cols)


def _operand_kind(operand: Optional[torch.Tensor]) -> int:
    """epilogue_tile's HAS_A / HAS_B: 0 none, 1 a value an element, 2 one row broadcast to all rows."""
    if operand is None:
        return 0
    return 2 if operand.stride(0) == 0 or operand.shape[0] == 1 else 1


def _epilogue_args(offset: torch.Tensor, col_scale: torch.Tensor, bias: Optional[torch.Tensor], codes: list[int],
                   operands: list[torch.Tensor], shape: Sequence[int], rows: int, cols: int, out: torch.Tensor,
                   quantize: Optional[tuple[float, int, str]],
                   operand_codes: Optional[tuple[float, int]] = None) -> tuple[list, dict]:
    """epilogue_tile's arguments after the accumulator: (positional, constexpr keywords). operand_codes: the
    operands' (scale, zero point) when they are codes (a convolution's uint8 residual), else None."""
    a, b = (list(operands) + [None, None])[:2]
    a = None if a is None else _as_rows(a, shape, rows, cols)
    b = None if b is None else _as_rows(b, shape, rows, cols)
    inv, zp, lo, hi = 1.0, 0, 0, 0
    if quantize is not None:
        inv, zp, (lo, hi) = inverse_scale(quantize[0]), quantize[1], QRANGE[quantize[2]]
    positional = [offset, col_scale, out if bias is None else bias, out if a is None else a, out if b is None else b,
                  out, rows, cols]
    operand_scale, operand_zero = operand_codes or (1.0, 0)
    strides = [0 if a is None else a.stride(0), 0 if a is None else a.stride(1),
               0 if b is None else b.stride(0), 0 if b is None else b.stride(1), float(operand_scale),
               float(operand_zero), inv, float(zp), float(lo), float(hi)]
    flags = dict(HAS_BIAS=bias is not None, HAS_A=_operand_kind(a), HAS_B=_operand_kind(b),
                 P0=codes[0], P1=codes[1], P2=codes[2], P3=codes[3], QUANTIZE=quantize is not None)
    return positional + strides, flags


def run_epilogue(acc: torch.Tensor, offset: torch.Tensor, col_scale: torch.Tensor, bias: Optional[torch.Tensor],
                 codes: list[int], operands: list[torch.Tensor], shape: Sequence[int], out_dtype: torch.dtype,
                 quantize: Optional[tuple[float, int, str]],
                 operand_codes: Optional[tuple[float, int]] = None) -> torch.Tensor:
    """acc [rows, cols] (int32, or float32 sums of integer products; contiguous) -> the layer's output of `shape`
    (quantize: (scale, zero point, dtype) or None; operand_codes: see _epilogue_args)."""
    rows, cols = acc.shape
    out = torch.empty((rows, cols), dtype=out_dtype, device=acc.device)
    if rows and cols:
        args, flags = _epilogue_args(offset, col_scale, bias, codes, operands, shape, rows, cols, out, quantize,
                                     operand_codes)
        block_m, block_n = 16, 128
        grid = ((rows + block_m - 1) // block_m, (cols + block_n - 1) // block_n)
        _triton.jit().epilogue[grid](acc, *args, **flags, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return out.reshape(tuple(shape))


@dataclass(frozen=True)
class GemmTile:
    """int8_gemm's launch: output tile, k step, row blocks walking the columns together, warps, pipeline stages."""
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    warps: int
    stages: int
    tma: bool = False  # operand tiles by the tensor memory accelerator where the GPU and the tensors allow it

    def programs(self, rows: int, cols: int) -> int:
        """How many output tiles (programs) a [rows, cols] output takes."""
        return -(-rows // self.block_m) * -(-cols // self.block_n)


# By the GEMM's rows, from benchmarks/gpu_int8_sweep.py on an H200 (BERT-base's shapes, batch 1 and 32). Many
# rows: TMA loads, 4-9 % faster than pointer loads at 4096 rows; with 128 rows they were 25-50 % slower, so few
# rows keep pointer loads (benchmarks/results/session32-gpu-h200.md).
GEMM_TILES = {"few_rows": GemmTile(64, 64, 128, 8, 4, 4), "many_rows": GemmTile(64, 128, 128, 8, 4, 3, tma=True)}
FEW_ROWS = 512


def gemm_tile(rows: int) -> GemmTile:
    return GEMM_TILES["few_rows" if rows <= FEW_ROWS else "many_rows"]


@functools.cache
def _tma_device(device_index: int) -> bool:
    """Whether this GPU has a tensor memory accelerator (Hopper, compute capability 9, and later) and this Triton
    host tensor descriptors."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def _tma_loads(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """TMA reads these operands: the GPU has it, and both are row-major with 16-byte aligned rows and starts
    (what a tensor descriptor needs)."""
    return (x.is_cuda and _tma_device(x.device.index or 0)
            and all(t.stride(1) == 1 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (x, weight)))


def run_int8_gemm(x: torch.Tensor, weight: torch.Tensor, flip: bool, offset: torch.Tensor, col_scale: torch.Tensor,
                  bias: Optional[torch.Tensor], codes: list[int], operands: list[torch.Tensor], shape: Sequence[int],
                  out_dtype: torch.dtype, quantize: Optional[tuple[float, int, str]],
                  tile: Optional[GemmTile] = None, weight_descriptors: Optional[dict] = None,
                  operand_codes: Optional[tuple[float, int]] = None) -> torch.Tensor:
    """x codes [rows, K] (uint8 when flip, else int8; K contiguous) times weight [cols, K] int8, then the epilogue,
    in one kernel -> the layer's output of `shape`. `weight_descriptors`: the layer's own cache of the weight's TMA
    descriptors by tile (built on the first call that reads it with TMA, not on every call); operand_codes: see
    _epilogue_args."""
    rows, k = x.shape
    cols = weight.shape[0]
    out = torch.empty((rows, cols), dtype=out_dtype, device=x.device)
    if rows and cols:
        tile = tile or gemm_tile(rows)
        block_k = min(tile.block_k, max(32, next_power_of_2(k)))
        args, flags = _epilogue_args(offset, col_scale, bias, codes, operands, shape, rows, cols, out, quantize,
                                     operand_codes)
        grid = (tile.programs(rows, cols),)
        blocks = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=block_k, GROUP_M=tile.group_m,
                      num_warps=tile.warps, num_stages=tile.stages)
        tma = tile.tma and _tma_loads(x, weight)
        if tma:
            from triton.tools.tensor_descriptor import TensorDescriptor

            x_in = TensorDescriptor.from_tensor(x, [tile.block_m, block_k])
            cache = {} if weight_descriptors is None else weight_descriptors
            w_in = cache.get((tile.block_n, block_k))
            if w_in is None:
                w_in = cache[(tile.block_n, block_k)] = TensorDescriptor.from_tensor(weight, [tile.block_n, block_k])
        else:
            x_in, w_in = x, weight
        _triton.jit().int8_gemm[grid](x_in, w_in, *args[:8], k, x.stride(0), *args[8:], **flags, FLIP=flip,
                                      EVEN_K=k % block_k == 0, TMA=tma, **blocks)
    return out.reshape(tuple(shape))


# int8_conv's output tiles, largest first (benchmarks/gpu_conv_sweep.py on an H200, ResNet-50's shapes at batch 1
# and 64): the first that gives at least CONV_PROGRAMS programs, else the smallest. Small convolutions (batch 1,
# the late stages) are latency-bound: more, smaller tiles keep the SMs busy (the 7x7 512-channel 3x3 conv at
# batch 1: 36 us with 64x64 tiles, 18 us with 32x32). No tile wider than the output's channels, except that
# 64 channels take 128x64.
CONV_TILES = [GemmTile(64, 128, 128, 8, 4, 3), GemmTile(32, 128, 128, 8, 4, 3), GemmTile(32, 64, 128, 8, 4, 3),
              GemmTile(32, 32, 128, 8, 4, 3)]
CONV_TILE_64_CHANNELS = GemmTile(128, 64, 128, 8, 4, 3)
CONV_PROGRAMS = 264  # two waves of an H100's or H200's 132 SMs


def conv_tile(rows: int, cols: int) -> GemmTile:
    candidates = [t for t in CONV_TILES if t.block_n <= max(cols, 32)]
    if cols <= 64:
        candidates.insert(0, CONV_TILE_64_CHANNELS)
    for tile in candidates:
        if tile.programs(rows, cols) >= CONV_PROGRAMS:
            return tile
    return candidates[-1]


def conv_gemm_tile(rows: int, cols: int) -> GemmTile:
    """A convolution run as int8_gemm (1x1, or on im2col rows): conv_tile's choice, with TMA loads where it picks a
    tile of 64 rows or more (many rows). At batch 64 on an H200 (benchmarks/gpu_conv_sweep.py --gemm,
    session48-gpu-conv-sweep-h200.log) that GEMM took 0.55-0.86 of the implicit convolution's time on ResNet-50's
    1x1 layers with the same tiles, TMA 1-8 % faster than pointer loads."""
    tile = conv_tile(rows, cols)
    return dataclasses.replace(tile, tma=True) if tile.block_m >= 64 else tile


def conv_block_k(channels: int) -> Optional[int]:
    """int8_conv's k step: the largest of 128, 64, 32 dividing the input channels (a step stays in one tap), or None
    (then steps of 32 gather across taps)."""
    return next((b for b in (128, 64, 32) if channels % b == 0), None)


def run_int8_conv(x: torch.Tensor, weight: torch.Tensor, flip: bool, x_zero_point: int, stride: Sequence[int],
                  padding: Sequence[int], dilation: Sequence[int], offset: torch.Tensor, col_scale: torch.Tensor,
                  bias: Optional[torch.Tensor], codes: list[int], operands: list[torch.Tensor], out_dtype: torch.dtype,
                  quantize: Optional[tuple[float, int, str]], operand_codes: Optional[tuple[float, int]],
                  tile: Optional[GemmTile] = None) -> torch.Tensor:
    """x codes [N, C, H, W] (channels-last memory; uint8 when flip, else int8) convolved with weight
    [Cout, KH, KW, C] int8 (contiguous), then the epilogue, in one kernel -> [N, Cout, OH, OW] channels-last.
    operands: the post-ops' [N, Cout, OH, OW] tensors; operand_codes: see _epilogue_args."""
    n, c, h, w = x.shape
    cols, kh, kw, _ = weight.shape
    oh = window_output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = window_output_size(w, kw, stride[1], padding[1], dilation[1])
    rows = n * oh * ow
    out = torch.empty((rows, cols), dtype=out_dtype, device=x.device)
    if rows and cols:
        tile = tile or conv_tile(rows, cols)
        block_k = conv_block_k(c)
        args, flags = _epilogue_args(offset, col_scale, bias, codes, [t.permute(0, 2, 3, 1) for t in operands],
                                     (n, oh, ow, cols), rows, cols, out, quantize, operand_codes)
        _triton.jit().int8_conv[(tile.programs(rows, cols),)](
            x, weight, *args[:8], c, h, w, oh, ow, stride[0], stride[1], padding[0], padding[1], dilation[0],
            dilation[1], x_zero_point, *args[8:], **flags, FLIP=flip, KW=kw, TAPS=kh * kw, BLOCK_M=tile.block_m,
            BLOCK_N=tile.block_n, BLOCK_K=min(tile.block_k, block_k or 32), GROUP_M=tile.group_m,
            GATHER=block_k is None, num_warps=tile.warps, num_stages=tile.stages)
    return out.reshape(n, oh, ow, cols).permute(0, 3, 1, 2)


IM2COL_BLOCKS = (256, 32, 4)  # (rows, columns, warps) a program of im2col_codes: gpu_conv_sweep.py --im2col


def im2col_depth(channels: int, taps: int) -> int:
    """The im2col rows' width: taps * channels rounded up to a multiple of 32 (an int8 GEMM's k step; 16-byte rows
    for TMA)."""
    return -(-taps * channels // 32) * 32


def run_im2col_codes(x: torch.Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int], x_zero_point: int,
                     blocks: Optional[tuple[int, int, int]] = None) -> torch.Tensor:
    """The im2col rows of x codes [N, C, H, W] (channels-last memory): [N, OH, OW, im2col_depth] codes, row
    (n, oh, ow) holding its window as k = (kh * KW + kw) * C + c (the [Cout, KH, KW, C] weight's order), padded
    positions and the columns past KH * KW * C as the zero point's code (x - zero point = 0)."""
    n, c, h, w = x.shape
    kh, kw = kernel
    oh = window_output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = window_output_size(w, kw, stride[1], padding[1], dilation[1])
    rows, depth = n * oh * ow, im2col_depth(c, kh * kw)
    out = torch.empty((rows, depth), dtype=x.dtype, device=x.device)
    if rows:
        block_r, block_k, warps = blocks or IM2COL_BLOCKS
        block_k = min(block_k, next_power_of_2(depth))
        _triton.jit().im2col_codes[((rows + block_r - 1) // block_r, (depth + block_k - 1) // block_k)](
            x, out, rows, h, w, oh, ow, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1],
            x_zero_point, C=c, KW=kw, TAPS=kh * kw, DEPTH=depth, BLOCK_R=block_r, BLOCK_K=block_k, num_warps=warps)
    return out.view(n, oh, ow, depth)


def next_power_of_2(n: int) -> int:
    """triton.next_power_of_2 (imported here, not at module import: CI imports the kernels without Triton)."""
    import triton

    return triton.next_power_of_2(n)


def run_heads_last(y: torch.Tensor, removed: Optional[torch.Tensor],
                   quantize: Optional[tuple[float, int, str]] = None,
                   multiplier: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Attention's output y [B, H, L, E] in heads-last memory (returned as [B, H, L, E], a transposed view), the
    rows `removed` marks (bool, broadcastable to [B, H, L, 1]) as 0; with quantize ((scale, zero point, dtype)) as
    codes, the multiplier running over H * E."""
    b, h, length, e = y.shape
    dtype = y.dtype if quantize is None else (torch.uint8 if quantize[2] == "uint8" else torch.int8)
    out = torch.empty((b, length, h, e), dtype=dtype, device=y.device)
    inv, zp, (lo, hi) = (1.0, 0, (0, 0)) if quantize is None else (inverse_scale(quantize[0]), quantize[1],
                                                                    QRANGE[quantize[2]])
    if out.numel():
        r_strides = (0, 0, 0) if removed is None else removed.expand(b, h, length, 1).stride()[:3]
        block = min(1024, next_power_of_2(h * e))
        _triton.jit().heads_last_rows[(b * length, (h * e + block - 1) // block)](
            y, y if removed is None else removed, y if multiplier is None else multiplier, out, length, h,
            *y.stride(), *r_strides, inv, float(zp), float(lo), float(hi), E=e, QUANTIZE=quantize is not None,
            HAS_MULTIPLIER=multiplier is not None, HAS_REMOVED=removed is not None, BLOCK=block, num_warps=4)
    return out.transpose(1, 2)


def run_quantize_to_channels_last(x: torch.Tensor, scale: float, zero_point: int, dtype: str) -> torch.Tensor:
    """Codes of x [N, C, H, W] (any strides) in channels-last memory, per tensor, as ir/ops/_quant.quantize."""
    n, c, h, w = x.shape
    out = torch.empty((n, c, h, w), dtype=torch.uint8 if dtype == "uint8" else torch.int8, device=x.device,
                      memory_format=torch.channels_last)
    lo, hi = QRANGE[dtype]
    pixels = n * h * w
    if pixels and c:
        block_c = min(16, next_power_of_2(c))
        block_p = 2048 // block_c
        _triton.jit().quantize_to_channels_last[((pixels + block_p - 1) // block_p, (c + block_c - 1) // block_c)](
            x, out, pixels, c, h * w, w, *x.stride(), inverse_scale(scale), float(zero_point), float(lo), float(hi),
            BLOCK_C=block_c, BLOCK_P=block_p, num_warps=4)
    return out


def run_codes_minus_zero_point(x: torch.Tensor, zero_point: int) -> torch.Tensor:
    """float32 x - zero point of codes x, dense in the memory format they have (the result keeps it)."""
    out = torch.empty_like(x, dtype=torch.float32)
    n = x.numel()
    if n:
        block = 1024
        _triton.jit().codes_minus_zero_point[((n + block - 1) // block,)](x, out, n, float(zero_point), BLOCK=block,
                                                                          num_warps=4)
    return out


def run_quantize(x: torch.Tensor, scale: float, zero_point: int, dtype: str,
                 multiplier: Optional[torch.Tensor], channels: Optional[int] = None) -> torch.Tensor:
    """Codes of x (contiguous in the memory format it has: the result keeps it), as ir/ops/_quant.quantize;
    the multiplier runs over the innermost `channels` elements (default: the last dim)."""
    out = torch.empty_like(x, dtype=torch.uint8 if dtype == "uint8" else torch.int8)
    lo, hi = QRANGE[dtype]
    n = x.numel()
    channels = channels or (x.shape[-1] if x.dim() else 1)
    if n:
        if multiplier is None:
            block = 1024
            grid = ((n + block - 1) // block,)
        else:  # a program per row and block of its channels
            block = min(1024, next_power_of_2(channels))
            grid = (n // channels, (channels + block - 1) // block)
        _triton.jit().quantize[grid](x, x if multiplier is None else multiplier, out, n, channels,
                                     inverse_scale(scale), float(zero_point), float(lo), float(hi),
                                     HAS_MULTIPLIER=multiplier is not None, BLOCK=block, num_warps=4)
    return out
