"""Torch-facing harness over the native kernel library (`ipexconvert._native`), for the per-ISA tests
and the kernel benchmarks: each function takes torch tensors, checks them, allocates the output and
calls the kernel with an explicit ISA cap.

  max_isa: cap the ISA level for this call (default: IPEXCONVERT_MAX_ISA, else the best the CPU
           supports); the kernel runs its build for the highest level <= that;
  threads: threads to use (default: torch.get_num_threads(), so torch's setting is respected).

Every kernel computes in fp32 and takes float32 or bfloat16 tensors that are contiguous and on the
CPU; norm weights/biases are converted to float32. The INT8 kernels (quantize_*, dequantize_*,
requantize), embedding and to_channels_last take other dtypes; see their docstrings. The runtime
kernels (ipexconvert/backends/cpu/kernels/) call the library directly, not through this file.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from ipexconvert.backends.cpu.native_lib import (_lib, _run, available, cpu_features, kernel_level,  # noqa: F401
                                                  kernel_levels, kernel_names, levels, raw, selected_level,
                                                  supported_levels, unavailable_reason)
from ipexconvert.backends.cpu.kernels._int8_gemm import pack_int8_weight  # noqa: F401  (the runtime's packing)
from ipexconvert.backends.cpu.kernels.woq_linear import pack_woq_weight  # noqa: F401  (the runtime's packing)


# ---- kernels --------------------------------------------------------------------------------

def _tensor(t, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def _param(t: Optional[torch.Tensor], name: str) -> Optional[torch.Tensor]:
    """Norm weights and biases go to the kernel as contiguous float32."""
    if t is None:
        return None
    return _tensor(t, name).to(torch.float32).contiguous()


def _threads(threads: Optional[int]) -> int:
    return torch.get_num_threads() if threads is None else int(threads)


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5, residual: Optional[torch.Tensor] = None, *, return_sum: bool = False,
               quantize_to: Optional[tuple[float, int, torch.dtype]] = None,
               quantize_multipliers: Optional[torch.Tensor] = None, max_isa: Optional[str] = None,
               threads: Optional[int] = None):
    """layer_norm over the last dim of x (+ residual). With return_sum, returns (y, x + residual);
    with quantize_to=(scale, zero_point, torch.uint8 or torch.int8), y quantized comes last, as
    quantize_per_tensor would make it, or with quantize_multipliers (one per column, SmoothQuant)
    as quantize_last_axis would."""
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    total = torch.empty_like(x) if return_sum and residual is not None else None
    q, q_args = None, {}
    if quantize_to is not None:
        scale, zero_point, dtype = quantize_to
        q, q_args = torch.empty(x.shape, dtype=dtype), {"q_scale": float(scale), "q_zero_point": int(zero_point),
                                                        "q_multipliers": _param(quantize_multipliers, "multipliers")}
    _run(lib.layer_norm, x, residual, _param(weight, "weight"), _param(bias, "bias"), float(eps), out, total,
         max_isa, _threads(threads), q_out=q, **q_args)
    outs = [out] + ([total if total is not None else x] if return_sum else []) + ([q] if q is not None else [])
    return tuple(outs) if len(outs) > 1 else out


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: Optional[float] = None,
             residual: Optional[torch.Tensor] = None, *, return_sum: bool = False, max_isa: Optional[str] = None,
             threads: Optional[int] = None):
    """rms_norm over the last dim of x (+ residual); eps None means float32's machine epsilon (as torch)."""
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    total = torch.empty_like(x) if return_sum and residual is not None else None
    eps = torch.finfo(torch.float32).eps if eps is None else float(eps)
    _run(lib.rms_norm, x, residual, _param(weight, "weight"), eps, out, total, max_isa, _threads(threads))
    if return_sum:
        return out, (total if total is not None else x)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None, *,
              scale: Optional[float] = None, quantize_to: Optional[tuple[float, int, torch.dtype]] = None,
              quantize_multipliers: Optional[torch.Tensor] = None, max_isa: Optional[str] = None,
              threads: Optional[int] = None) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v (scale None: 1/sqrt(head_dim)).

    bfloat16 q/k/v (kernel `attention`, head_dim a multiple of 32): AMX tile products, or
    AVX512-BF16 vdpbf16ps products below the amx level; built for avx512_bf16 and amx.
    float32 q/k/v (kernel `attention_f32`, head_dim a multiple of 16): fp32 FMA products and
    softmax throughout; built for avx2 and avx512. Below its kernel's lowest build this raises
    RuntimeError.

    q [batch, heads, q_len, head_dim], k and v [batch, heads, kv_len, head_dim] (float32: also fewer heads, a
    divisor of q's, that groups of query heads share: grouped-query attention), one dtype, with
    a contiguous last dim (other strides are free: views into a packed QKV projection work);
    mask additive float32/bfloat16, broadcastable to [batch, heads, q_len, kv_len] with a full
    last dim. Returns [batch, heads, q_len, head_dim] as a view of a [batch, q_len, heads,
    head_dim] buffer (what a model transposes it into next).

    quantize_to=(scale, zero_point, torch.uint8 or torch.int8) returns the output's codes
    instead, as the quantize op makes them of the output viewed as [batch, q_len, heads *
    head_dim]: per tensor, or with quantize_multipliers (heads * head_dim, SmoothQuant) along
    that last axis.
    """
    lib = _lib()
    q, k, v = _tensor(q, "q"), _tensor(k, "k"), _tensor(v, "v")
    if q.dim() != 4:
        raise ValueError(f"q {tuple(q.shape)} must be 4-D: [batch, heads, q_len, head_dim]")
    if mask is not None and mask.dim() < 4:
        mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    batch, heads, q_len, head_dim = q.shape
    q_args = {}
    if quantize_multipliers is not None and quantize_to is None:
        raise ValueError("quantize_multipliers needs quantize_to (the output quantized)")
    if quantize_to is not None:
        q_scale, zero_point, out_dtype = quantize_to
        q_args = {"q_scale": float(q_scale), "q_zero_point": int(zero_point),
                  "q_multipliers": _param(quantize_multipliers, "multipliers")}
    else:
        out_dtype = q.dtype
    out = torch.empty(batch, q_len, heads, head_dim, dtype=out_dtype).permute(0, 2, 1, 3)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    _run(lib.attention, q, k, v, mask, out, scale, max_isa, _threads(threads), **q_args)
    return out


def softmax(x: torch.Tensor, dim: int = -1, *, scale: float = 1.0, mask: Optional[torch.Tensor] = None,
            max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """softmax(x * scale + mask) over the last dim; mask broadcasts to x (e.g. [batch, 1, 1, keys])."""
    lib = _lib()
    x = _tensor(x, "x")
    if dim not in (-1, x.dim() - 1):
        raise ValueError(f"native softmax works over the last dim only (got dim={dim} for {x.dim()} dims)")
    if mask is not None:
        mask = _tensor(mask, "mask")
        if mask.dim() > x.dim():
            raise ValueError(f"mask {list(mask.shape)} has more dims than x {list(x.shape)}")
        mask = mask.reshape((1,) * (x.dim() - mask.dim()) + tuple(mask.shape))  # same rank as x, strides kept
        if mask.shape[-1] != x.shape[-1] or (mask.shape[-1] > 1 and mask.stride(-1) != 1):
            mask = mask.expand(*mask.shape[:-1], x.shape[-1]).contiguous()
    out = torch.empty_like(x)
    _run(lib.softmax, x, float(scale), mask, out, max_isa, _threads(threads))
    return out


def gelu(x: torch.Tensor, approximate: str = "none", *, max_isa: Optional[str] = None,
         threads: Optional[int] = None) -> torch.Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    _run(lib.gelu, x, approximate == "tanh", out, max_isa, _threads(threads))
    return out


def silu(x: torch.Tensor, *, max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    lib = _lib()
    x = _tensor(x, "x")
    out = torch.empty_like(x)
    _run(lib.silu, x, out, max_isa, _threads(threads))
    return out


def silu_mul(a: torch.Tensor, b: torch.Tensor, *, max_isa: Optional[str] = None,
             threads: Optional[int] = None) -> torch.Tensor:
    """silu(a) * b in one pass (SwiGLU gate); a and b have the same shape and dtype."""
    lib = _lib()
    a, b = _tensor(a, "a"), _tensor(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a {list(a.shape)} and b {list(b.shape)} must have the same shape")
    out = torch.empty_like(a)
    _run(lib.silu_mul, a, b, out, max_isa, _threads(threads))
    return out


# ---- INT8 -----------------------------------------------------------------------------------
# Quantized values are plain int8/uint8 tensors (not torch quantized tensors); scale and zero
# point travel separately. Rounding is half to even, results saturate. Per-channel parameters
# run along axis 0 (the tensor seen as [shape[0], rest], as torch.quantize_per_channel(axis=0)
# and the [out, in] weights of a linear); requantize's run along the last axis (the output
# channels of an int8 GEMM's [M, N] accumulator).

_QDTYPES = {torch.int8: torch.int8, torch.uint8: torch.uint8, torch.qint8: torch.int8, torch.quint8: torch.uint8}
_QRANGE = {torch.int8: (-128, 127), torch.uint8: (0, 255)}
_FDTYPES = (torch.float32, torch.bfloat16)


def _qdtype(dtype) -> torch.dtype:
    if dtype not in _QDTYPES:
        raise ValueError(f"dtype must be torch.int8 or torch.uint8 (or qint8/quint8), got {dtype}")
    return _QDTYPES[dtype]


def _fdtype(dtype, what: str) -> torch.dtype:
    if dtype not in _FDTYPES:
        raise ValueError(f"{what} must be torch.float32 or torch.bfloat16, got {dtype}")
    return dtype


def _float_input(x, name: str) -> torch.Tensor:
    x = _tensor(x, name)
    if x.dtype not in _FDTYPES:
        raise ValueError(f"{name} has dtype {x.dtype}; quantize takes float32 or bfloat16")
    return x


def _quantized_input(q, name: str) -> torch.Tensor:
    q = _tensor(q, name)
    if q.dtype not in (torch.int8, torch.uint8):
        raise ValueError(f"{name} has dtype {q.dtype}; it must be int8 or uint8 "
                         "(for a torch quantized tensor pass q.int_repr())")
    return q


def _scales(scale, n: Optional[int], name: str) -> torch.Tensor:
    """float32 scales (one, or n for per-channel); each must be positive and finite."""
    s = torch.as_tensor(scale, dtype=torch.float64).reshape(-1)
    if n is not None and s.numel() != n:
        raise ValueError(f"{name} has {s.numel()} elements; per-channel needs one per channel along axis 0 ({n})")
    if n is None and s.numel() != 1:
        raise ValueError(f"{name} must be a single number for per-tensor quantization")
    s = s.to(torch.float32)
    if not bool(torch.all(torch.isfinite(s) & (s > 0))):
        raise ValueError(f"{name} must be positive and finite (as float32), got {s.tolist()[:8]}")
    return s.contiguous()


def _zero_points(zero_point, n: Optional[int], name: str, qdtype: torch.dtype) -> torch.Tensor:
    z = torch.as_tensor(zero_point).reshape(-1)
    if z.is_floating_point() and not bool(torch.all(z == z.round())):
        raise ValueError(f"{name} must be integers, got {z.tolist()[:8]}")
    want = 1 if n is None else n
    if z.numel() != want:
        raise ValueError(f"{name} has {z.numel()} elements; expected {want}")
    lo, hi = _QRANGE[qdtype]
    if bool(torch.any((z < lo) | (z > hi))):
        raise ValueError(f"{name} {z.tolist()[:8]} is outside the {qdtype} range [{lo}, {hi}]")
    return z.to(torch.int32).contiguous()


def _axis0(x: torch.Tensor, axis: int) -> int:
    if x.dim() == 0:
        raise ValueError("per-channel (de)quantization needs a tensor with at least one dim")
    if axis not in (0, -x.dim()):
        raise ValueError(f"native per-channel (de)quantization runs along axis 0 only (got axis={axis}); "
                         "move the channel axis first with .movedim(axis, 0).contiguous()")
    return x.shape[0]


def quantize_per_tensor(x: torch.Tensor, scale: float, zero_point: int, dtype=torch.int8, *,
                        max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """clamp(round_half_even(x * (1/scale)) + zero_point) as int8/uint8; bit-identical to
    torch.quantize_per_tensor(x.float(), scale, zero_point, qdtype).int_repr()."""
    lib = _lib()
    x, qd = _float_input(x, "x"), _qdtype(dtype)
    out = torch.empty(x.shape, dtype=qd)
    _run(lib.quantize, x, _scales(scale, None, "scale"), _zero_points(zero_point, None, "zero_point", qd), False, out,
         max_isa, _threads(threads))
    return out


def quantize_per_channel(x: torch.Tensor, scales, zero_points, dtype=torch.int8, axis: int = 0, *,
                         max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """Per-channel quantization along axis 0 (scales/zero_points: one per x.shape[0]); matches
    torch.quantize_per_channel(x.float(), scales, zero_points, 0, qdtype).int_repr()."""
    lib = _lib()
    x, qd = _float_input(x, "x"), _qdtype(dtype)
    n = _axis0(x, axis)
    out = torch.empty(x.shape, dtype=qd)
    _run(lib.quantize, x, _scales(scales, n, "scales"), _zero_points(zero_points, n, "zero_points", qd), True, out,
         max_isa, _threads(threads))
    return out


def dequantize_per_tensor(q: torch.Tensor, scale: float, zero_point: int, dtype=torch.float32, *,
                          max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """(q - zero_point) * scale as float32 or bfloat16; q is int8 or uint8."""
    lib = _lib()
    q = _quantized_input(q, "q")
    out = torch.empty(q.shape, dtype=_fdtype(dtype, "dtype"))
    _run(lib.dequantize, q, _scales(scale, None, "scale"), _zero_points(zero_point, None, "zero_point", q.dtype), False,
         out, max_isa, _threads(threads))
    return out


def dequantize_per_channel(q: torch.Tensor, scales, zero_points, dtype=torch.float32, axis: int = 0, *,
                           max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """Per-channel (q - zero_points[c]) * scales[c] along axis 0."""
    lib = _lib()
    q = _quantized_input(q, "q")
    n = _axis0(q, axis)
    out = torch.empty(q.shape, dtype=_fdtype(dtype, "dtype"))
    _run(lib.dequantize, q, _scales(scales, n, "scales"), _zero_points(zero_points, n, "zero_points", q.dtype), True,
         out, max_isa, _threads(threads))
    return out


def requantize(acc: torch.Tensor, multiplier, zero_point: int = 0, dtype=torch.int8, bias: Optional[torch.Tensor] = None,
               *, max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """int8 GEMM epilogue: clamp(round_half_even(float(acc + bias) * multiplier) + zero_point).

    acc: int32 [..., N]; multiplier: one float or N (per output channel, the last axis), usually
    input_scale * weight_scale / output_scale; bias: optional int32 [N], added in int32 (wraps);
    zero_point: the output's."""
    lib = _lib()
    acc = _tensor(acc, "acc")
    if acc.dtype != torch.int32:
        raise ValueError(f"acc has dtype {acc.dtype}; requantize takes an int32 accumulator")
    if acc.dim() == 0:
        raise ValueError("acc must have at least one dim (the last is the output channels)")
    qd = _qdtype(dtype)
    m = torch.as_tensor(multiplier, dtype=torch.float64).reshape(-1).to(torch.float32).contiguous()
    if not bool(torch.all(torch.isfinite(m))):
        raise ValueError("multiplier must be finite")
    z = int(_zero_points(zero_point, None, "zero_point", qd)[0])
    if bias is not None:
        bias = _tensor(bias, "bias")
        if bias.dtype != torch.int32:
            raise ValueError(f"bias has dtype {bias.dtype}; it must be int32 (quantize it with scale "
                             "input_scale * weight_scale and zero point 0)")
    out = torch.empty(acc.shape, dtype=qd)
    _run(lib.requantize, acc, m, bias, z, out, max_isa, _threads(threads))
    return out


def quantize_last_axis(x: torch.Tensor, inv_scales, zero_point: int, dtype=torch.uint8, *,
                       max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """Activation quantization with one multiplier per channel of the LAST axis (SmoothQuant
    smoothing folded into the quantize step): for x float32/bfloat16 [..., C],

        q[..., c] = clamp(round_half_even(x[..., c] * inv_scales[c]) + zero_point)

    as int8/uint8 of x's shape; bit-identical to
    torch.clamp(torch.round(x.float() * inv_scales) + zero_point, qmin, qmax).to(dtype)
    (a float32 multiply, then rounding: pass inv_scales = smooth[c] / scale, not scales to divide by).
    inv_scales: C positive finite numbers (float64 is rounded to float32); zero_point: one integer
    inside dtype's range. A non-contiguous x (e.g. channels_last) is made contiguous first."""
    lib = _lib()
    x, qd = _float_input(x, "x"), _qdtype(dtype)
    if x.dim() == 0:
        raise ValueError("x must have at least one dim (the last is the channels)")
    c = x.shape[-1]
    inv = torch.as_tensor(_tensor(inv_scales, "inv_scales") if isinstance(inv_scales, torch.Tensor) else inv_scales,
                          dtype=torch.float64)
    if inv.dim() > 1 or inv.numel() != c:
        raise ValueError(f"inv_scales {list(inv.shape)} must have {c} elements "
                         f"(one per channel: the last dim of x {list(x.shape)})")
    inv = inv.reshape(-1).to(torch.float32)
    if not bool(torch.all(torch.isfinite(inv) & (inv > 0))):
        raise ValueError(f"inv_scales must be positive and finite (as float32), got {inv.tolist()[:8]}")
    z = int(_zero_points(zero_point, None, "zero_point", qd)[0])
    x = x.contiguous()  # channels_last or other strides: the kernel reads [rows, C] row-major
    out = torch.empty(x.shape, dtype=qd)
    _run(lib.quantize_last_axis, x, inv.contiguous(), z, out, max_isa, _threads(threads))
    return out


def embedding(weight: torch.Tensor, indices: torch.Tensor, *, max_isa: Optional[str] = None,
              threads: Optional[int] = None) -> torch.Tensor:
    """weight[indices] for a float32/bfloat16 [V, D] table and int64/int32 indices of any shape
    (output [*indices.shape, D]); an index outside [0, V) raises IndexError, nothing is read."""
    lib = _lib()
    weight, indices = _tensor(weight, "weight"), _tensor(indices, "indices")
    if weight.dim() != 2:
        raise ValueError(f"weight {list(weight.shape)} must be 2-D [num_embeddings, embedding_dim]")
    out = torch.empty((*indices.shape, weight.shape[1]), dtype=weight.dtype)
    _run(lib.embedding, weight, indices, out, max_isa, _threads(threads))
    return out


def to_channels_last(x: torch.Tensor, dtype: Optional[torch.dtype] = None, *, scale: Optional[float] = None,
                     zero_point: int = 0, max_isa: Optional[str] = None, threads: Optional[int] = None,
                     check_finite: bool = False):
    """A contiguous [N, C, H, W] float32/bfloat16 x as a channels-last tensor of `dtype` (default x's):
    float32 or bfloat16 values equal x.to(dtype).contiguous(memory_format=torch.channels_last);
    torch.int8/torch.uint8 (with scale and zero_point) are quantized per tensor, the codes of
    quantize_per_tensor(x, scale, zero_point, dtype), in channels-last order. One pass over x.
    check_finite: returns (that tensor, whether every value of x is finite), found in the same pass."""
    lib = _lib()
    x = _float_input(x, "x")
    if x.dim() != 4:
        raise ValueError(f"x {list(x.shape)} must be 4-D [N, C, H, W]")
    dtype = x.dtype if dtype is None else dtype
    if dtype in _QDTYPES:
        dtype = _qdtype(dtype)
        if scale is None:
            raise ValueError("a quantized output needs a scale")
        scale = float(_scales(scale, None, "scale")[0])
        zero_point = int(_zero_points(zero_point, None, "zero_point", dtype)[0])
    else:
        dtype, scale, zero_point = _fdtype(dtype, "dtype"), 1.0, 0
    n, c, h, w = x.shape
    nhwc = torch.empty((n, h, w, c), dtype=dtype)
    finite = _run(lib.to_channels_last, x, nhwc, scale, zero_point, max_isa, _threads(threads), check_finite)
    out = nhwc.permute(0, 3, 1, 2)  # the same memory as [N, C, H, W] in channels-last strides
    return (out, finite) if check_finite else out


def spatial_mean(x: torch.Tensor, *, max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """The mean over H and W of a float32/bfloat16 [N, C, H, W] x, contiguous or channels-last, as
    [N, C, 1, 1] of x's dtype: F.adaptive_avg_pool2d(x, 1), summed in float32."""
    lib = _lib()
    x = _float_input(x, "x")
    if x.dim() != 4:
        raise ValueError(f"x {list(x.shape)} must be 4-D [N, C, H, W]")
    channels_last = not x.is_contiguous()
    if channels_last:
        if not x.is_contiguous(memory_format=torch.channels_last):
            raise ValueError(f"x {list(x.shape)} is neither contiguous nor channels-last; call .contiguous() first")
        x = x.permute(0, 2, 3, 1)  # the NHWC view, contiguous
    n, c = x.shape[0], x.shape[3] if channels_last else x.shape[1]
    out = torch.empty((n, c), dtype=x.dtype)
    _run(lib.spatial_mean, x, channels_last, out, max_isa, _threads(threads))
    return out.view(n, c, 1, 1)


def concat_channels(a: torch.Tensor, b: torch.Tensor, *, max_isa: Optional[str] = None,
                    threads: Optional[int] = None) -> torch.Tensor:
    """torch.cat([a, b], dim=1) of two 4-D tensors of one dtype whose channels are contiguous
    (channels-last, or strided views of it such as x[:, :, ::2, ::2]), as a channels-last tensor."""
    lib = _lib()
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-D tensor [N, C, H, W]")
    n, _, h, w = a.shape
    out = torch.empty((n, h, w, a.shape[1] + b.shape[1]), dtype=a.dtype).permute(0, 3, 1, 2)
    _run(lib.concat_channels, a, b, out, max_isa, _threads(threads))
    return out


# ---- int8 GEMM without VNNI -----------------------------------------------------------------

INT8_GEMM_OUTPUTS = (torch.float32, torch.bfloat16, torch.uint8, torch.int8)


def int8_gemm(a: torch.Tensor, a_zero_point: int, packed: torch.Tensor, n: int, scales: torch.Tensor,
              bias: Optional[torch.Tensor] = None, *, relu: bool = False, out_dtype: torch.dtype = torch.float32,
              out_scale: float = 1.0, out_zero_point: int = 0, max_isa: Optional[str] = None,
              threads: Optional[int] = None) -> torch.Tensor:
    """(a - a_zero_point) @ W^T with exact int32 sums, then * scales + bias (+ relu) per output
    column, as out_dtype (uint8/int8: quantized with out_scale, out_zero_point as quantize does).
    a: uint8 [..., k]; packed: pack_int8_weight(W) of W [n, k]; scales, bias: float32 [n]."""
    a = _tensor(a, "a")
    if out_dtype not in INT8_GEMM_OUTPUTS:
        raise ValueError(f"out_dtype must be one of {INT8_GEMM_OUTPUTS}, got {out_dtype}")
    rows = a.reshape(-1, a.shape[-1])
    out = torch.empty((rows.shape[0], n), dtype=out_dtype)
    _run(_lib().int8_gemm, rows, int(a_zero_point), packed, int(n), scales.float().contiguous(),
         None if bias is None else bias.float().contiguous(), bool(relu), out, float(out_scale), int(out_zero_point),
         max_isa, _threads(threads))
    return out.view(*a.shape[:-1], n)


# ---- weight-only quantized GEMM (int8 / int4 weights) ------------------------------------------------

def woq_gemm(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor] = None,
             bias: Optional[torch.Tensor] = None, *, bits: int, group_size: int, path: int = 0,
             max_isa: Optional[str] = None, threads: Optional[int] = None) -> torch.Tensor:
    """x [..., k] float32 @ dequant(W)^T + bias as float32 [..., n], W given as the woq_linear op stores it:
    codes int8 [n, k] (bits 8) or uint8 [n, k / 2] (bits 4), scales float32 [n, k / group_size], zero points
    uint8 or None. Packed here (pack_woq_weight) on every call. path: 0 by rows, 1 decode, 2 prefill, 3 decode on
    int8-quantized x (4-bit weights, avx2 and up; numerically different), 4 int8 weights (packed in k-quads) on
    int8-quantized x (avx2 and up), 5 4-bit weights (packed in k-octets) on int8-quantized x (avx512_vnni)."""
    x = _tensor(x, "x")
    rows = x.reshape(-1, x.shape[-1])
    n = codes.shape[0]
    packed, qparams, has_zero = pack_woq_weight(codes, scales, zero_points, bits, group_size, integer_layout=path in (4, 5))
    out = torch.empty((rows.shape[0], n), dtype=torch.float32)
    _run(_lib().woq_gemm, rows, packed, n, bits, group_size, qparams, has_zero,
         None if bias is None else bias.float().contiguous(), out, max_isa, _threads(threads), path)
    return out.view(*x.shape[:-1], n)
