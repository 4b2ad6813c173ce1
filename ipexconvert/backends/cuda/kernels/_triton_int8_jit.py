"""The Triton source of _triton_int8.py's kernels (imported only where Triton is: the JIT resolves the
helpers it calls as module globals)."""
import triton
import triton.language as tl



@triton.jit
def round_half_even(v):  # v float64
    r = tl.floor(v + 0.5)
    return tl.where((r - v == 0.5) & (r - 2.0 * tl.floor(r * 0.5) != 0.0), r - 1.0, r)


@triton.jit
def post_op(y, code: tl.constexpr, a, b):
    if code == 1:
        y = tl.maximum(y, 0.0)
    elif code == 2:
        y = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    elif code == 3:
        inner = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        y = 0.5 * y * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))
    elif code == 4:
        y = y / (1.0 + tl.exp(-y))
    elif code == 5:
        y = 1.0 / (1.0 + tl.exp(-y))
    elif code == 6:
        y = 2.0 / (1.0 + tl.exp(-2.0 * y)) - 1.0
    elif code == 10:
        y = y + a
    elif code == 11:
        y = y + b
    elif code == 12:
        y = y * a
    elif code == 13:
        y = y * b
    return y


@triton.jit
def epilogue(acc_ptr, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, rows, cols,
             a_row_stride, a_col_stride, b_row_stride, b_col_stride, inv_out_scale, out_zero_point, lo, hi,
             HAS_BIAS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
             P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, QUANTIZE: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)[:, None]
    c = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    inside = (r < rows) & (c < cols)
    acc = tl.load(acc_ptr + r * cols + c, mask=inside, other=0)
    acc = acc + tl.load(offset_ptr + c, mask=c < cols, other=0)
    y = acc.to(tl.float32) * tl.load(scale_ptr + c, mask=c < cols, other=0.0)
    if HAS_BIAS:
        y = y + tl.load(bias_ptr + c, mask=c < cols, other=0.0)
    a = 0.0
    b = 0.0
    if HAS_A:
        a = tl.load(a_ptr + r * a_row_stride + c * a_col_stride, mask=inside, other=0.0).to(tl.float32)
    if HAS_B:
        b = tl.load(b_ptr + r * b_row_stride + c * b_col_stride, mask=inside, other=0.0).to(tl.float32)
    y = post_op(y, P0, a, b)
    y = post_op(y, P1, a, b)
    y = post_op(y, P2, a, b)
    y = post_op(y, P3, a, b)
    if QUANTIZE:
        v = (y.to(tl.float64) * inv_out_scale + out_zero_point).to(tl.float32)
        q = tl.minimum(tl.maximum(round_half_even(v.to(tl.float64)), lo), hi)
        tl.store(out_ptr + r * cols + c, q.to(out_ptr.dtype.element_ty), mask=inside)
    else:
        tl.store(out_ptr + r * cols + c, y.to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def quantize(x_ptr, m_ptr, out_ptr, n, channels, inv_scale, zero_point, lo, hi,
             HAS_MULTIPLIER: tl.constexpr, BLOCK: tl.constexpr):
    i = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    inside = i < n
    x = tl.load(x_ptr + i, mask=inside, other=0.0).to(tl.float32)
    if HAS_MULTIPLIER:
        m = tl.load(m_ptr + i % channels, mask=inside, other=0.0)
        v = round_half_even((x * m).to(tl.float64)) + zero_point
    else:
        v = round_half_even((x.to(tl.float64) * inv_scale + zero_point).to(tl.float32).to(tl.float64))
    q = tl.minimum(tl.maximum(v, lo), hi)
    tl.store(out_ptr + i, q.to(out_ptr.dtype.element_ty), mask=inside)
