"""The Triton source of the GPU kernels (layer norm, int8 epilogue, quantize), imported only where Triton is
(_triton.py): Triton's JIT resolves the helpers a kernel calls as module globals, so they all live here,
and the quantize arithmetic is written once (codes_of). The launchers are _triton_layer_norm.py and
_triton_int8.py."""
import triton
import triton.language as tl


@triton.jit
def round_half_even_small(v):  # v float32, |v| < 2^22
    """Rounding half to even of a small float32 in float32 arithmetic: adding 1.5 * 2^23 leaves no fraction bits,
    so the sum is rounded (to nearest, ties to even, as every IEEE add); subtracting it back is exact."""
    return (v + 12582912.0) - 12582912.0


@triton.jit
def codes_of(x, m, inv_scale, zero_point, lo, hi, HAS_MULTIPLIER: tl.constexpr):
    """ir/ops/_quant.quantize of float32 x: with a multiplier m, round(x * m) (a float32 product) plus the
    zero point; else round(float32(x * inv_scale + zero point)), product and sum in float64; clamped.
    Clamped before rounding (the bounds are integers and rounding is monotone, so the codes are the same), which
    lets the rounding run in float32 (round_half_even_small) instead of float64."""
    if HAS_MULTIPLIER:
        v = round_half_even_small(tl.minimum(tl.maximum(x * m, lo - zero_point), hi - zero_point)) + zero_point
    else:
        v = (x.to(tl.float64) * inv_scale + zero_point).to(tl.float32)
        v = round_half_even_small(tl.minimum(tl.maximum(v, lo), hi))
    return v


@triton.jit
def silu(y):  # float32 y: the post-op, silu_mul and the down projection's prologue compute it alike
    return y / (1.0 + tl.exp(-y))


@triton.jit
def gelu(y):
    """The erf GELU written as 0.5 y erfc(-y / sqrt(2)), erfc(z) for z >= 0 as t exp(-z^2 + P(t)), t = 1 / (1 + z / 2),
    with the Chebyshev coefficients of Numerical Recipes' erfcc (fractional error below 1.2e-7 for every z), and
    erfc(-z) = 2 - erfc(z). As erfc, the negative tail keeps its relative accuracy (1 + erf(x) cancels there: torch's
    float32 GELU is 1e-3 off relatively at -6). In base 2: u = |z| sqrt(log2 e), the coefficients times log2 e, so
    the exponential is one exp2 of P(t) - u^2; the reciprocal is the fast one (2 ulp). 26 instructions an element
    for sm_90 against 32 with libdevice's erf (which picks one of two coefficient sets per element)."""
    u = tl.abs(y) * 0.8493218002880191  # |y| / sqrt(2) * sqrt(log2 e)
    t = tl.fdiv(1.0, 1.0 + 0.41627730557884884 * u, ieee_rounding=False)  # 1 / (1 + |y| / sqrt(2) / 2)
    p = 0.24651729790196045
    p = p * t - 1.1861149450768025
    p = p * t + 2.147474463933521
    p = p * t - 1.637753152343414
    p = p * t + 0.40232158165127635
    p = p * t - 0.2687568603388257
    p = p * t + 0.1396300565225048
    p = p * t + 0.5397006155284324
    p = p * t + 1.4427292039075317
    p = p * t - 1.825748218405333
    r = t * tl.math.exp2(p - u * u)  # erfc(|y| / sqrt(2))
    return 0.5 * y * tl.where(y <= 0.0, r, 2.0 - r)


@triton.jit
def post_op(y, code: tl.constexpr, a, b):
    if code == 1:
        y = tl.maximum(y, 0.0)
    elif code == 2:
        y = gelu(y)
    elif code == 3:
        inner = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        y = 0.5 * y * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))
    elif code == 4:
        y = silu(y)
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
def epilogue_tile(acc, r, c, rows, cols, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr,
                  a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale, operand_zero,
                  inv_out_scale, out_zero_point, lo, hi,
                  HAS_BIAS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
                  P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, QUANTIZE: tl.constexpr):
    """An accumulator tile (int32 sums, or float32 ones of integer products; rows r [M, 1] int64, columns c
    [1, N]) to the layer's output: the zero-point column term, scale, bias, post-ops (operands dequantized as
    (v - operand_zero) * operand_scale: 0 and 1 for float operands), then the float output or requantized codes
    (out row-major [rows, cols]). HAS_A / HAS_B: 0 no operand, 1 one value an element, 2 one row for all rows
    (a per-column vector such as a SmoothQuant multiplier: read once a column, not once an element)."""
    inside = (r < rows) & (c < cols)
    acc = acc + tl.load(offset_ptr + c, mask=c < cols, other=0)
    y = acc.to(tl.float32) * tl.load(scale_ptr + c, mask=c < cols, other=0.0)
    if HAS_BIAS:
        y = y + tl.load(bias_ptr + c, mask=c < cols, other=0.0)
    a = 0.0
    b = 0.0
    if HAS_A == 1:
        a = tl.load(a_ptr + r * a_row_stride + c * a_col_stride, mask=inside, other=0.0).to(tl.float32)
    elif HAS_A == 2:
        a = tl.load(a_ptr + c * a_col_stride, mask=c < cols, other=0.0).to(tl.float32)
    if HAS_A:
        a = (a - operand_zero) * operand_scale
    if HAS_B == 1:
        b = tl.load(b_ptr + r * b_row_stride + c * b_col_stride, mask=inside, other=0.0).to(tl.float32)
    elif HAS_B == 2:
        b = tl.load(b_ptr + c * b_col_stride, mask=c < cols, other=0.0).to(tl.float32)
    if HAS_B:
        b = (b - operand_zero) * operand_scale
    y = post_op(y, P0, a, b)
    y = post_op(y, P1, a, b)
    y = post_op(y, P2, a, b)
    y = post_op(y, P3, a, b)
    if QUANTIZE:
        q = codes_of(y, 0.0, inv_out_scale, out_zero_point, lo, hi, False)
        tl.store(out_ptr + r * cols + c, q.to(out_ptr.dtype.element_ty), mask=inside)
    else:
        tl.store(out_ptr + r * cols + c, y.to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def epilogue(acc_ptr, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, rows, cols,
             a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale, operand_zero,
             inv_out_scale, out_zero_point, lo, hi,
             HAS_BIAS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
             P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, QUANTIZE: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)[:, None]
    c = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    acc = tl.load(acc_ptr + r * cols + c, mask=(r < rows) & (c < cols), other=0)
    epilogue_tile(acc, r, c, rows, cols, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr,
                  a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale, operand_zero,
                  inv_out_scale, out_zero_point, lo, hi, HAS_BIAS, HAS_A, HAS_B, P0, P1, P2, P3, QUANTIZE)


@triton.jit
def dot_codes(x, w, acc, FLIP: tl.constexpr):
    """acc + x @ w in int32 on the tensor cores; FLIP: x holds uint8 codes, taken as int8 less 128 (a top-bit flip)."""
    if FLIP:
        x = (x ^ 0x80).to(tl.int8, bitcast=True)
    return tl.dot(x, w, acc, out_dtype=tl.int32)


@triton.jit
def grouped_tile(rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's (row block, column block): GROUP_M row blocks walk the column blocks together, so a weight
    block is read from L2 by all of them."""
    pid = tl.program_id(0)
    blocks_m = tl.cdiv(rows, BLOCK_M)
    per_group = GROUP_M * tl.cdiv(cols, BLOCK_N)
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(blocks_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % group_rows, (pid % per_group) // group_rows


@triton.jit
def int8_gemm(x_ptr, w_ptr, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, rows, cols, K, x_row_stride,
              a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale, operand_zero,
              inv_out_scale, out_zero_point, lo, hi,
              FLIP: tl.constexpr, EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_A: tl.constexpr,
              HAS_B: tl.constexpr, P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr,
              QUANTIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              GROUP_M: tl.constexpr, TMA: tl.constexpr):
    """x codes [rows, K] (uint8 flipped to int8 by FLIP: x - 128) times w [cols, K] int8 (K contiguous), summed
    in int32 on the tensor cores, then epilogue_tile: the qlinear in one kernel (programs in grouped_tile's
    order). TMA: x_ptr and w_ptr are tensor descriptors of x and w, whose tiles Hopper's tensor memory
    accelerator loads (blocks past the ends read as 0: the store drops the rows and columns, and past K w's zeros
    cancel whatever x's flipped zeros become); else pointers, loaded by the threads."""
    pid_m, pid_n = grouped_tile(rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    if TMA:
        for start in range(0, K, BLOCK_K):
            x = x_ptr.load([pid_m * BLOCK_M, start])
            w = w_ptr.load([pid_n * BLOCK_N, start])
            acc = dot_codes(x, w.T, acc, FLIP)
    else:
        k = tl.arange(0, BLOCK_K)
        # rows and columns past the end read row/column 0 (in bounds, no mask in the loop); the store drops them
        x_tile = x_ptr + (rm % rows).to(tl.int64)[:, None] * x_row_stride + k[None, :]
        w_tile = w_ptr + (rn % cols).to(tl.int64)[None, :] * K + k[:, None]
        for start in range(0, K, BLOCK_K):
            if EVEN_K:
                x = tl.load(x_tile + start)
                w = tl.load(w_tile + start)
            else:
                x = tl.load(x_tile + start, mask=(start + k)[None, :] < K, other=128 if FLIP else 0)
                w = tl.load(w_tile + start, mask=(start + k)[:, None] < K, other=0)
            acc = dot_codes(x, w, acc, FLIP)
    epilogue_tile(acc, rm.to(tl.int64)[:, None], rn[None, :], rows, cols, offset_ptr, scale_ptr, bias_ptr, a_ptr,
                  b_ptr, out_ptr, a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale,
                  operand_zero, inv_out_scale, out_zero_point, lo, hi, HAS_BIAS, HAS_A, HAS_B, P0, P1, P2, P3,
                  QUANTIZE)


@triton.jit
def int8_conv(x_ptr, w_ptr, offset_ptr, scale_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, rows, cols, C, H, W, OH, OW,
              stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, x_zero_point,
              a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale, operand_zero,
              inv_out_scale, out_zero_point, lo, hi,
              FLIP: tl.constexpr, KW: tl.constexpr, TAPS: tl.constexpr, HAS_BIAS: tl.constexpr,
              HAS_A: tl.constexpr, HAS_B: tl.constexpr, P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr,
              P3: tl.constexpr, QUANTIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, GATHER: tl.constexpr):
    """A convolution as an implicit GEMM on the tensor cores: output pixels (rows = N * OH * OW, channels-last)
    times output channels (cols), summed over k = (tap, channel), tap = kh * KW + kw, from x codes [N, H, W, C]
    and w [cols, taps * C] int8. A padded position reads the zero point's code (x - zp = 0), so the zero-point
    column term stays one constant a column. Then epilogue_tile. Without GATHER, C % BLOCK_K == 0: a k step stays
    in one tap and reads BLOCK_K contiguous channels a pixel. With GATHER (few channels, such as an image's 3), a
    k step spans taps: each k finds its tap and channel, and past taps * C reads zero weights."""
    pid_m, pid_n = grouped_tile(rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    pixel = rm % rows
    ow = pixel % OW
    oh = (pixel // OW) % OH
    n = pixel // (OW * OH)
    k = tl.arange(0, BLOCK_K)
    w_tile = w_ptr + (rn % cols).to(tl.int64)[None, :] * (TAPS * C) + k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for start in range(0, TAPS * C, BLOCK_K):
        if GATHER:
            kk = start + k
            tap = kk // C
            ih = oh[:, None] * stride_h - pad_h + (tap // KW)[None, :] * dil_h
            iw = ow[:, None] * stride_w - pad_w + (tap % KW)[None, :] * dil_w
            inside = (kk < TAPS * C)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x = tl.load(x_ptr + ((n[:, None] * H + ih).to(tl.int64) * W + iw) * C + (kk % C)[None, :], mask=inside,
                        other=0)
            x = tl.where(inside, x, x_zero_point.to(x.dtype))
            w = tl.load(w_tile + start, mask=(kk < TAPS * C)[:, None], other=0)
        else:
            tap = start // C
            ih = oh * stride_h - pad_h + (tap // KW) * dil_h
            iw = ow * stride_w - pad_w + (tap % KW) * dil_w
            inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_row = x_ptr + ((n * H + ih).to(tl.int64) * W + iw) * C + (start - tap * C)
            x = tl.load(x_row[:, None] + k[None, :], mask=inside[:, None], other=0)
            x = tl.where(inside[:, None], x, x_zero_point.to(x.dtype))
            w = tl.load(w_tile + start)
        acc = dot_codes(x, w, acc, FLIP)
    epilogue_tile(acc, rm.to(tl.int64)[:, None], rn[None, :], rows, cols, offset_ptr, scale_ptr, bias_ptr, a_ptr,
                  b_ptr, out_ptr, a_row_stride, a_col_stride, b_row_stride, b_col_stride, operand_scale,
                  operand_zero, inv_out_scale, out_zero_point, lo, hi, HAS_BIAS, HAS_A, HAS_B, P0, P1, P2, P3,
                  QUANTIZE)


@triton.jit
def im2col_codes(x_ptr, out_ptr, rows, H, W, OH, OW, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, x_zero_point,
                 C: tl.constexpr, KW: tl.constexpr, TAPS: tl.constexpr, DEPTH: tl.constexpr, BLOCK_R: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """The im2col rows of x codes [N, H, W, C] (channels-last): out [rows, DEPTH], row (n, oh, ow) holding
    k = tap * C + c, tap = kh * KW + kw; padded positions and k past TAPS * C read the zero point's code. Integer
    arithmetic bounds this kernel (a byte an element), so the address splits into a row's window origin and a
    column's offset in it, each computed once, and the bounds into a row's limits and a column's tap position. C is
    a constant (an image's 3 channels): its divisions compile to multiplies."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    kk = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    ow = r % OW
    oh = (r // OW) % OH
    top = oh * stride_h - pad_h  # the window's first row and column (negative in the padding)
    left = ow * stride_w - pad_w
    origin = (((r // (OW * OH)).to(tl.int64) * H + top) * W + left) * C
    tap = kk // C
    dy = (tap // KW) * dil_h  # a column's position in the window
    dx = (tap % KW) * dil_w
    offset = (dy * W + dx) * C + kk % C
    stored = (r < rows)[:, None] & (kk < DEPTH)[None, :]
    inside = (stored & (kk < TAPS * C)[None, :] & (dy[None, :] >= -top[:, None]) & (dy[None, :] < H - top[:, None])
              & (dx[None, :] >= -left[:, None]) & (dx[None, :] < W - left[:, None]))
    v = tl.load(x_ptr + origin[:, None] + offset[None, :], mask=inside, other=0)
    v = tl.where(inside, v, x_zero_point.to(v.dtype))
    tl.store(out_ptr + r.to(tl.int64)[:, None] * DEPTH + kk[None, :], v, mask=stored)


@triton.jit
def quantize(x_ptr, m_ptr, out_ptr, n, channels, inv_scale, zero_point, lo, hi,
             HAS_MULTIPLIER: tl.constexpr, BLOCK: tl.constexpr):
    """Codes of x's n values. With a multiplier over the innermost `channels` values, program (row, block of the
    row's channels), so no value's channel is found by a division (a 64-bit modulo cost 48 instructions a value);
    without, BLOCK values a program."""
    if HAS_MULTIPLIER:
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        i = tl.program_id(0).to(tl.int64) * channels + c
        inside = c < channels
        m = tl.load(m_ptr + c, mask=inside, other=0.0)
    else:
        i = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
        inside = i < n
        m = 0.0
    x = tl.load(x_ptr + i, mask=inside, other=0.0).to(tl.float32)
    q = codes_of(x, m, inv_scale, zero_point, lo, hi, HAS_MULTIPLIER)
    tl.store(out_ptr + i, q.to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def quantize_to_channels_last(x_ptr, out_ptr, pixels, C, HW, W, x_sn, x_sc, x_sh, x_sw, inv_scale, zero_point, lo,
                              hi, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    """Codes of x [N, C, H, W] (any strides: an image in NCHW) written channels-last (out [N, H, W, C]), per tensor.
    A program takes BLOCK_C channels of BLOCK_P pixels (pixels = N * H * W), the pixels innermost, so an NCHW
    input is read along its rows."""
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    n = p // HW
    hw = p % HW
    at = n.to(tl.int64) * x_sn + (hw // W) * x_sh + (hw % W) * x_sw
    ok = (c < C)[:, None] & (p < pixels)[None, :]
    x = tl.load(x_ptr + c[:, None] * x_sc + at[None, :], mask=ok, other=0.0).to(tl.float32)
    q = codes_of(x, 0.0, inv_scale, zero_point, lo, hi, False)
    tl.store(out_ptr + p.to(tl.int64)[None, :] * C + c[:, None], q.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def heads_last_rows(y_ptr, removed_ptr, m_ptr, out_ptr, L, H, y_sb, y_sh, y_sl, y_se, r_sb, r_sh, r_sl,
                    inv_scale, zero_point, lo, hi, E: tl.constexpr, QUANTIZE: tl.constexpr,
                    HAS_MULTIPLIER: tl.constexpr, HAS_REMOVED: tl.constexpr, BLOCK: tl.constexpr):
    """Attention's output y [B, H, L, E] (any strides) into heads-last memory [B, L, H, E] (the layout the heads
    are merged in next), the rows the mask removes entirely (removed, broadcast over [B, H, L]) as 0, and with
    QUANTIZE as codes (the multiplier over H * E): sdpa's fill, copy and quantize in one pass. A program takes
    BLOCK of one output row's H * E values (program 0: the row b * L + line), so the only divisions are by the
    head size."""
    row = tl.program_id(0)
    b = row // L
    line = row % L
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = j < H * E
    h = j // E
    e = j % E
    x = tl.load(y_ptr + b.to(tl.int64) * y_sb + line * y_sl + h * y_sh + e * y_se, mask=inside, other=0.0)
    if HAS_REMOVED:
        removed = tl.load(removed_ptr + b.to(tl.int64) * r_sb + line * r_sl + h * r_sh, mask=inside, other=0)
        x = tl.where(removed != 0, 0.0, x)
    if QUANTIZE:
        m = 0.0
        if HAS_MULTIPLIER:
            m = tl.load(m_ptr + j, mask=inside, other=0.0)
        x = codes_of(x.to(tl.float32), m, inv_scale, zero_point, lo, hi, HAS_MULTIPLIER)
    tl.store(out_ptr + row.to(tl.int64) * (H * E) + j, x.to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def max_pool_codes(x_ptr, out_ptr, rows, C, H, W, OH, OW, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, lowest,
                   KH: tl.constexpr, KW: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """2-D max pooling of integer codes in channels-last memory (x [N, H, W, C], out [N, OH, OW, C]): a program
    takes BLOCK_P output pixels (rows = N * OH * OW) times BLOCK_C channels; padded positions read `lowest`, the
    type's smallest code, so they never win (as torch's implicit -inf padding)."""
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    pixel_ok = p < rows
    c_ok = c < C
    ow = p % OW
    oh = (p // OW) % OH
    n = p // (OW * OH)
    best = tl.full((BLOCK_P, BLOCK_C), lowest, tl.int32)
    for kh in tl.static_range(KH):
        for kw in tl.static_range(KW):
            ih = oh * stride_h - pad_h + kh * dil_h
            iw = ow * stride_w - pad_w + kw * dil_w
            inside = pixel_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            at = ((n * H + ih).to(tl.int64) * W + iw) * C
            v = tl.load(x_ptr + at[:, None] + c[None, :], mask=inside[:, None] & c_ok[None, :], other=lowest)
            best = tl.maximum(best, v.to(tl.int32))
    tl.store(out_ptr + p.to(tl.int64)[:, None] * C + c[None, :], best.to(out_ptr.dtype.element_ty),
             mask=pixel_ok[:, None] & c_ok[None, :])


@triton.jit
def codes_minus_zero_point(x_ptr, out_ptr, n, zero_point, BLOCK: tl.constexpr):
    """Integer codes as float32 less their zero point (exact: |v| < 2^9): a convolution's input on the codes."""
    i = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    inside = i < n
    x = tl.load(x_ptr + i, mask=inside, other=0)
    tl.store(out_ptr + i, x.to(tl.float32) - zero_point, mask=inside)


@triton.jit
def add_layer_norm_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, sum_ptr, m_ptr, q_ptr, columns, eps,
                        inv_scale, zero_point, lo, hi,
                        HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                        WRITE_SUM: tl.constexpr, QUANTIZE: tl.constexpr, HAS_MULTIPLIER: tl.constexpr,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < columns
    offsets = row * columns + cols
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0)
    if HAS_RESIDUAL:
        total = x + tl.load(r_ptr + offsets, mask=inside, other=0.0)  # in the activations' dtype
        if WRITE_SUM:
            tl.store(sum_ptr + offsets, total, mask=inside)
    else:
        total = x
    v = total.to(tl.float32)
    mean = tl.sum(v, axis=0) / columns
    centered = tl.where(inside, v - mean, 0.0)
    variance = tl.sum(centered * centered, axis=0) / columns
    y = centered * (1.0 / tl.sqrt(variance + eps))
    if HAS_WEIGHT:
        y = y * tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y = y + tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    y = y.to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offsets, y, mask=inside)
    if QUANTIZE:  # the codes of y as stored (rounded to the activations' dtype), as the reference
        m = 0.0
        if HAS_MULTIPLIER:
            m = tl.load(m_ptr + cols, mask=inside, other=0.0)
        q = codes_of(y.to(tl.float32), m, inv_scale, zero_point, lo, hi, HAS_MULTIPLIER)
        tl.store(q_ptr + offsets, q.to(q_ptr.dtype.element_ty), mask=inside)


@triton.jit
def rms_norm_rows(x_ptr, w_ptr, y_ptr, columns, eps, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
    """y = x / sqrt(mean(x^2) + eps) * w over a row, in float32, rounded once to y's dtype (ir/ops/rms_norm.py)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < columns
    v = tl.load(x_ptr + row * columns + cols, mask=inside, other=0.0).to(tl.float32)
    y = v * (1.0 / tl.sqrt(tl.sum(v * v, axis=0) / columns + eps))
    if HAS_WEIGHT:
        y = y * tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * columns + cols, y.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def rope_kv_write_heads(q_ptr, k_ptr, v_ptr, q_batch, q_seq, k_batch, k_seq, v_batch, v_seq,
                        cos_ptr, sin_ptr, table_batch, table_seq, position_ptr,
                        q_out_ptr, key_ptr, value_ptr, seq, heads, kv_heads, capacity,
                        HALF: tl.constexpr, ROWS: tl.constexpr):
    """One head of one token per program (grid: batch * seq, heads + 2 * kv_heads): a query head rotated into
    q_out [b, heads, seq, d], a key head rotated and a value head copied into the caches [b, kv_heads, capacity,
    d] at position + token. rope: x * cos + cat(-x2, x1) * sin in float32, rounded once (ir/ops/rope.py).
    ROWS: the caches hold int8 rows [b, kv_heads, capacity, d + 4] (int8_row): the key as rounded to the
    projections' dtype, then quantized, as the reference writes it."""
    width = 2 * HALF + 4 * ROWS  # a cache row's elements
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    b = token // seq
    t = token % seq
    lo = tl.arange(0, HALF)
    position = tl.load(position_ptr) + t
    if head < heads + kv_heads:
        if head < heads:
            src = q_ptr + b * q_batch + t * q_seq + head * 2 * HALF
        else:
            src = k_ptr + b * k_batch + t * k_seq + (head - heads) * 2 * HALF
        x1 = tl.load(src + lo).to(tl.float32)
        x2 = tl.load(src + HALF + lo).to(tl.float32)
        table = b * table_batch + t * table_seq
        c1 = tl.load(cos_ptr + table + lo).to(tl.float32)
        c2 = tl.load(cos_ptr + table + HALF + lo).to(tl.float32)
        s1 = tl.load(sin_ptr + table + lo).to(tl.float32)
        s2 = tl.load(sin_ptr + table + HALF + lo).to(tl.float32)
        y1, y2 = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
        # (separate names: the cache may be narrower than q_out, and one variable cannot hold both pointer types)
        if head < heads:
            q_dst = q_out_ptr + ((b * heads + head) * seq + t) * 2 * HALF
            tl.store(q_dst + lo, y1.to(q_dst.dtype.element_ty))
            tl.store(q_dst + HALF + lo, y2.to(q_dst.dtype.element_ty))
        else:
            k_dst = key_ptr + ((b * kv_heads + head - heads) * capacity + position) * width
            if ROWS:
                source = k_ptr.dtype.element_ty
                int8_row(y1.to(source).to(tl.float32), y2.to(source).to(tl.float32), k_dst, HALF)
            else:
                tl.store(k_dst + lo, y1.to(k_dst.dtype.element_ty))
                tl.store(k_dst + HALF + lo, y2.to(k_dst.dtype.element_ty))
    else:
        src = v_ptr + b * v_batch + t * v_seq + (head - heads - kv_heads) * 2 * HALF
        dst = value_ptr + ((b * kv_heads + head - heads - kv_heads) * capacity + position) * width
        if ROWS:
            int8_row(tl.load(src + lo).to(tl.float32), tl.load(src + HALF + lo).to(tl.float32), dst, HALF)
        else:
            tl.store(dst + lo, tl.load(src + lo).to(dst.dtype.element_ty))  # (a narrower cache: rounded)
            tl.store(dst + HALF + lo, tl.load(src + HALF + lo).to(dst.dtype.element_ty))


@triton.jit
def int8_row(y1, y2, row_ptr, HALF: tl.constexpr):
    """A row of two float32 halves stored as ir/ops/_kv_int8.py's int8 row at row_ptr: its codes, then its float32
    scale as 4 bytes (row_ptr + 2 * HALF is 4-byte aligned: the launcher checks). scale = max |x| / 127, code =
    clamp(round_half_even(x / scale), -127, 127), both IEEE divisions; codes 0 at scale 0; a row holding a NaN or an
    infinity stores scale NaN and codes 0."""
    lo = tl.arange(0, HALF)
    finite = (tl.sum(y1 * 0.0, axis=0) + tl.sum(y2 * 0.0, axis=0)) == 0.0  # (x * 0 is NaN for NaN and infinity)
    scale = tl.math.div_rn(tl.maximum(tl.max(tl.abs(y1), axis=0), tl.max(tl.abs(y2), axis=0)), 127.0)
    usable = finite & (scale > 0.0)
    divisor = tl.where(usable, scale, 1.0)
    c1 = round_half_even_small(tl.minimum(tl.maximum(tl.math.div_rn(y1, divisor), -127.0), 127.0))
    c2 = round_half_even_small(tl.minimum(tl.maximum(tl.math.div_rn(y2, divisor), -127.0), 127.0))
    tl.store(row_ptr + lo, tl.where(usable, c1, 0.0).to(tl.int8))
    tl.store(row_ptr + HALF + lo, tl.where(usable, c2, 0.0).to(tl.int8))
    tl.store((row_ptr + 2 * HALF).to(tl.pointer_type(tl.float32)), tl.where(finite, scale, float("nan")))


@triton.jit
def woq_run_weights(words_ptr, scales_ptr, zeros_ptr, n64, n_ok, w, word, end_word, k_words, groups, group_size,
                    BITS: tl.constexpr, ZERO: tl.constexpr, HAS_ZEROS: tl.constexpr, PER_WORD: tl.constexpr):
    """The codes of one run of k from word `word` of a row (int32 words, as unsigned bytes for int8), its group's
    scales and the offset to take off (BASE + zero, woq_rows); zeros past end_word. The word offsets are whole
    multiples of 16 when k_words and the split are (Triton's integer arguments are marked so), which lets the
    loads be 16 bytes wide."""
    live = n_ok & (n64 * 0 + word < end_word)  # (tensors: the interpreter wants tensor masks)
    group = word * PER_WORD // group_size
    scale = tl.load(scales_ptr + n64 * groups + group, mask=live, other=0.0)
    if BITS == 16:
        offset = tl.zeros(n64.shape, tl.float32)  # (bf16 weights: the value is the code)
    elif BITS == 8:
        offset = tl.full(n64.shape, 384.0, tl.float32)  # 256 + the 128 the flipped sign bit adds
    elif HAS_ZEROS:
        offset = tl.load(zeros_ptr + n64 * groups + group, mask=live, other=0).to(tl.float32) + 16.0
    else:
        offset = tl.full(n64.shape, ZERO + 16.0, tl.float32)
    words = tl.load(words_ptr + n64[:, None] * k_words + (word + w)[None, :], mask=live[:, None],
                    other=0).to(tl.uint32, bitcast=True)
    if BITS == 8:
        words = words ^ 0x80808080  # int8 codes as stored + 128: unsigned bytes
    return words, scale, offset


@triton.jit
def woq_input(x_row, norm_ptr, k, K, inv_rms, PROLOGUE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr):
    """x[k] of a woq_rows row in float32, after its prologue (rounded to x's dtype as the prologue's op stores it)."""
    y = tl.load(x_row + k).to(tl.float32)
    if PROLOGUE == 1:
        y = y * inv_rms
        if HAS_NORM_WEIGHT:
            y = y * tl.load(norm_ptr + k)
        y = y.to(x_row.dtype.element_ty).to(tl.float32)
    elif PROLOGUE == 2:
        y = (silu(y) * tl.load(x_row + K + k).to(tl.float32)).to(x_row.dtype.element_ty).to(tl.float32)
    return y


@triton.jit
def woq_row_scan(x_row, norm_ptr, K, eps, PROLOGUE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr,
                 INT8_ROWS: tl.constexpr, ROW_CHUNK: tl.constexpr):
    """What every program of a woq_rows / woq_rows_dp4a row reads of the whole row first, so that all of them treat x
    alike: (1 / rms of x for PROLOGUE 1, the row's int8 step max |x'| / 127 of x' = x after its prologue, or 1 where
    that max is 0). A row is read ROW_CHUNK values at a time: few dependent trips to memory."""
    inv_rms = 1.0
    if PROLOGUE == 1:
        squares = tl.zeros([ROW_CHUNK], tl.float32)
        for k0 in range(0, K, ROW_CHUNK):
            at = k0 + tl.arange(0, ROW_CHUNK)
            v = tl.load(x_row + at, mask=at < K, other=0.0).to(tl.float32)
            squares += v * v
        inv_rms = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / K + eps)
    row_scale = 1.0
    if INT8_ROWS:
        amax = tl.zeros([ROW_CHUNK], tl.float32)
        for k0 in range(0, K, ROW_CHUNK):
            at = k0 + tl.arange(0, ROW_CHUNK)
            inside = at < K
            v = woq_input(x_row, norm_ptr, tl.where(inside, at, 0), K, inv_rms, PROLOGUE, HAS_NORM_WEIGHT)
            amax = tl.maximum(amax, tl.where(inside, tl.abs(v), 0.0))
        top = tl.max(amax, axis=0)
        row_scale = tl.where(top > 0, tl.math.div_rn(top, 127.0), 1.0)
    return inv_rms, row_scale


@triton.jit
def woq_program_slice(block, part, N, k_words, split_words, BLOCK_N: tl.constexpr, WORDS: tl.constexpr):
    """What a woq_rows / woq_rows_dp4a program computes: columns n (n_ok inside N; n64 for addresses), a run's word
    offsets w, and its words [word_begin, word_end) of k (the part-th split)."""
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    word_begin = part * split_words
    return n, n < N, n.to(tl.int64), tl.arange(0, WORDS), word_begin, tl.minimum(k_words, word_begin + split_words)


@triton.jit
def attention_weights(parts_ptr, first_k, stats, splits, GROUP: tl.constexpr, SPLITS: tl.constexpr, R: tl.constexpr,
                      DV: tl.constexpr):
    """For inputs first_k [words] of an output projection whose x is the heads merged after attention_rows (PARTIALS:
    its key splits' partials in parts, one query row), each word's head's partial rows [SPLITS, words], the splits'
    softmax weights exp(max_j - max) and their weighted sum: what the attention's last program would combine with."""
    j = tl.arange(0, SPLITS)
    head = first_k // DV  # (a word's codes lie in one head: DV is a multiple of the codes a word)
    rows = ((head // GROUP)[None, :] * SPLITS + j[:, None]) * R + (head % GROUP)[None, :]
    used = (j < splits)[:, None] & (head >= 0)[None, :]
    tops = tl.load(parts_ptr + stats * DV + rows, mask=used, other=float("-inf"))
    sums = tl.load(parts_ptr + stats * (DV + 1) + rows, mask=used, other=0.0)
    best = tl.max(tops, axis=0)
    weight = tl.exp(tops - tl.where(best == float("-inf"), 0.0, best)[None, :])
    return rows, used, weight, tl.sum(weight * sums, axis=0)


@triton.jit
def attention_input(parts_ptr, like_ptr, rows, used, weight, summed, k, DV: tl.constexpr):
    """x[k] [words] of that projection: the splits' values combined and divided as attention_finish does, rounded to
    x's dtype (like_ptr's) as the attention node stores it; 0 where the mask removed every key."""
    accs = tl.load(parts_ptr + rows * DV + (k % DV)[None, :], mask=used, other=0.0)
    y = tl.where(summed > 0, tl.sum(weight * accs, axis=0) / tl.where(summed > 0, summed, 1.0), 0.0)
    return y.to(like_ptr.dtype.element_ty).to(tl.float32)


@triton.jit
def woq_run_sums(words, x_row, norm_ptr, first_k, K, inv_rms, code_mask, kv_stats, kv_splits, BITS: tl.constexpr,
                 PROLOGUE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr, KV_GROUP: tl.constexpr,
                 KV_SPLITS: tl.constexpr, KV_R: tl.constexpr, KV_DV: tl.constexpr):
    """woq_rows' float sums over code words [columns, words] whose first code is input first_k [words] of x:
    sum (BASE + c) * x per column and word, and sum x per word. A code c becomes BASE + c exactly with one shift and
    one mask-and-or: moved under the exponent bits of BASE = 2^(23 - LOW), whose last mantissa bit is worth 1.
    BITS 16 (bf16 weights, two a word, k even in the low half): a weight is its half moved to the top of a float32,
    sum w * x (x's sum is not needed: no offset).
    PROLOGUE 3: x is combined from attention partials in norm_ptr (attention_weights; KV_* their layout)."""
    PER_WORD: tl.constexpr = 32 // BITS
    LOW: tl.constexpr = 19 if BITS == 4 else 15
    BASE_BITS: tl.constexpr = 0x41800000 if BITS == 4 else 0x43800000  # 16.0, 256.0
    run = tl.zeros(words.shape, tl.float32)
    x_sum = tl.zeros(first_k.shape, tl.float32)
    if PROLOGUE == 3:  # the splits' weights once a run: a word's codes share a head
        rows, used, weight, summed = attention_weights(norm_ptr, first_k, kv_stats, kv_splits, KV_GROUP, KV_SPLITS,
                                                       KV_R, KV_DV)
    for t in tl.static_range(PER_WORD):
        if PROLOGUE == 3:
            x = attention_input(norm_ptr, x_row, rows, used, weight, summed, first_k + t, KV_DV)
        else:
            x = woq_input(x_row, norm_ptr, first_k + t, K, inv_rms, PROLOGUE, HAS_NORM_WEIGHT)
        if BITS == 16:
            if t == 0:  # (not named weight: PROLOGUE 3's softmax weights are)
                w16 = (words << 16).to(tl.float32, bitcast=True)
            else:
                w16 = ((words >> 16) << 16).to(tl.float32, bitcast=True)
            run += w16 * x[None, :]
        else:
            x_sum += x
            if LOW >= BITS * t:
                moved = words << (LOW - BITS * t)
            else:
                moved = words >> (BITS * t - LOW)
            # code_mask comes as an argument: a constant would be rematerialized into a register per use
            code = ((moved & code_mask) | BASE_BITS).to(tl.float32, bitcast=True)
            run += code * x[None, :]
    return run, x_sum


@triton.jit
def woq_rows(x_ptr, words_ptr, scales_ptr, zeros_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, work_ptr, ticket_ptr,
             norm_ptr, N, K, k_words, groups, group_size, split_words, splits, code_mask, x_row_stride, eps,
             a_row_stride, a_col_stride, b_row_stride, b_col_stride,
             cos_ptr, sin_ptr, table_batch, table_seq, position_ptr, key_ptr, value_ptr, seq, heads, kv_heads,
             capacity, kv_stats, kv_splits,
             BITS: tl.constexpr, ZERO: tl.constexpr, HAS_ZEROS: tl.constexpr, HAS_BIAS: tl.constexpr,
             HAS_A: tl.constexpr, HAS_B: tl.constexpr,
             P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr,
             RUN: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, SPLIT_ROWS: tl.constexpr,
             PROLOGUE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr, GDC: tl.constexpr, ROPE_HALF: tl.constexpr,
             KV_GROUP: tl.constexpr, KV_SPLITS: tl.constexpr, KV_R: tl.constexpr, KV_DV: tl.constexpr,
             ROW_CHUNK: tl.constexpr, PREFETCH: tl.constexpr):
    """One row of x [rows, K] (float activations) times a weight-only quantized W [N, K]^T (ir/ops/woq_linear.py).
    Program (i, j, m) computes BLOCK_N outputs of row m over the j-th split_words words of codes, reading the codes
    as int32 words (8 int4 codes a word, k = 8 w + s at bits 4 s; 4 int8 codes, k = 4 w + s at bits 8 s), one run of
    RUN consecutive k (inside one group) a step, the next run's codes loaded while this one computes.
    A code c becomes BASE + c exactly with one shift and one mask-and-or: moved under the exponent bits of
    BASE = 2^(23 - LOW), whose last mantissa bit is worth 1 (no conversion instruction: those issue at a fraction
    of the integer rate, which already bounds this loop). A run sums (BASE + c) * x and takes (BASE + zero) *
    sum(x) off once per word and column, then times the group's scale: the rounding error of a run's sum is at
    most ~2^-24 * 31 * sum|x| (int4; 511 for int8), a few times float32's own accumulation error.
    PROLOGUE (ir/ops/prologue_woq_linear.py): 1, x is rms_norm(x) * norm weight (every program reads the row's sum
    of squares first); 2, x is silu(gate) * up of a row [gate | up] (x_row_stride = 2 K); either rounded to x's
    dtype, as the op it replaces stores it. 3 (ir/ops/sdpa_woq_linear.py): x is one query row's attention over the
    heads merged, combined from attention_rows' partials (PARTIALS) in norm_ptr as it is read (attention_input;
    kv_stats, kv_splits and KV_*: their layout), rounded to x_ptr's dtype.
    SPLIT, the partial sums' reduction: woq_split_sum; the end: woq_finish, or with ROPE_HALF > 0
    (ir/ops/woq_linear_rope_kv_write.py: out is the merged q/k/v projection's q output) woq_rope_finish.
    GDC (launched with programmatic dependent launch, Hopper and later): the program may start while the kernel
    before it still runs; it loads its first run of codes (no kernel writes weights), then waits for that kernel
    (gdc_wait: until it has finished and its writes are visible) before it reads x or writes anything, and lets
    the next kernel launch once its loop is done. PREFETCH (with GDC; the launcher checks the alignment): before the
    wait it also asks for the rest of its codes to be brought into L2 (l2_prefetch: a range a column), so the loop
    after the wait reads them from L2 rather than from memory."""
    block = tl.program_id(0)
    part = tl.program_id(1)
    row = tl.program_id(2).to(tl.int64)
    PER_WORD: tl.constexpr = 32 // BITS
    WORDS: tl.constexpr = RUN // PER_WORD  # words of a run
    n, n_ok, n64, w, word_begin, word_end = woq_program_slice(block, part, N, k_words, split_words, BLOCK_N, WORDS)
    words, scale, offset = woq_run_weights(words_ptr, scales_ptr, zeros_ptr, n64, n_ok, w, word_begin, word_end,
                                           k_words, groups, group_size, BITS, ZERO, HAS_ZEROS, PER_WORD)
    if PREFETCH:
        rest = word_begin + WORDS  # (the first run is in registers already)
        nbytes = tl.maximum(word_end - rest, 0) * 4
        l2_prefetch((words_ptr + n64 * k_words + rest).to(tl.int64), n * 0 + nbytes, n_ok & (nbytes > 0))
    if GDC:
        tl.extra.cuda.gdc_wait()
    x_row = x_ptr + row * x_row_stride
    inv_rms, _ = woq_row_scan(x_row, norm_ptr, K, eps, PROLOGUE, HAS_NORM_WEIGHT, False, ROW_CHUNK)
    acc = tl.zeros([BLOCK_N, WORDS], tl.float32)
    for word in range(word_begin, word_end, WORDS):
        next_words, next_scale, next_offset = woq_run_weights(
            words_ptr, scales_ptr, zeros_ptr, n64, n_ok, w, word + WORDS, word_end, k_words, groups, group_size,
            BITS, ZERO, HAS_ZEROS, PER_WORD)
        run, x_sum = woq_run_sums(words, x_row, norm_ptr, word * PER_WORD + w * PER_WORD, K, inv_rms, code_mask,
                                  kv_stats, kv_splits, BITS, PROLOGUE, HAS_NORM_WEIGHT, KV_GROUP, KV_SPLITS, KV_R,
                                  KV_DV)
        if BITS == 16:
            acc += run * scale[:, None]
        else:
            acc += (run - offset[:, None] * x_sum[None, :]) * scale[:, None]
        words, scale, offset = next_words, next_scale, next_offset
    if GDC:
        tl.extra.cuda.gdc_launch_dependents()
    y, last = woq_split_sum(tl.sum(acc, axis=1), row, n, n_ok, N, part, splits, work_ptr, ticket_ptr, SPLIT,
                            SPLIT_ROWS)
    if last:
        if ROPE_HALF > 0:
            woq_rope_finish(y, row, n, n_ok, bias_ptr, cos_ptr, sin_ptr, table_batch, table_seq, position_ptr, out_ptr,
                            key_ptr, value_ptr, seq, heads, kv_heads, capacity, HAS_BIAS, ROPE_HALF)
        else:
            woq_finish(y, row, n, n_ok, N, bias_ptr, a_ptr, b_ptr, out_ptr, a_row_stride, a_col_stride,
                       b_row_stride, b_col_stride, HAS_BIAS, HAS_A, HAS_B, P0, P1, P2, P3)


@triton.jit
def l2_prefetch(addresses, nbytes, on):
    """Ask for nbytes at each address (an int64 byte address, 16-byte aligned; nbytes a multiple of 16) to be brought
    into L2 where `on` (Hopper's cp.async.bulk.prefetch.L2: one instruction a range, no register held, no wait). A
    hint: L2 is where every SM's reads and writes meet, so no value read after it can differ; a kernel launched
    with programmatic dependent launch asks for its bytes before its wait, while the kernel before it finishes."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r,r", [addresses, nbytes, on.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def dot4(a, b, c, SIGNED_A: tl.constexpr, ASM: tl.constexpr):
    """c + the dot product of the four bytes of int32 a (signed or unsigned) with the four signed bytes of int32 b:
    PTX's dp4a, four multiply-adds in one instruction. ASM False (Triton's interpreter runs no PTX): the same sum
    from the bytes."""
    if ASM:
        if SIGNED_A:
            c = tl.inline_asm_elementwise("dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32,
                                          is_pure=True, pack=1)
        else:
            c = tl.inline_asm_elementwise("dp4a.u32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32,
                                          is_pure=True, pack=1)
    else:
        for i in tl.static_range(4):
            if SIGNED_A:
                byte_a = (a << (24 - 8 * i)) >> 24
            else:
                byte_a = (a >> (8 * i)) & 0xFF
            c += byte_a * ((b << (24 - 8 * i)) >> 24)
    return c


@triton.jit
def woq_rows_dp4a(x_ptr, words_ptr, scales_ptr, zeros_ptr, bias_ptr, a_ptr, b_ptr, out_ptr, work_ptr, ticket_ptr,
                  norm_ptr, x_codes_ptr, N, K, k_words, groups, group_size, split_words, splits, x_row_stride, eps,
                  a_row_stride, a_col_stride, b_row_stride, b_col_stride,
                  BITS: tl.constexpr, ZERO: tl.constexpr, HAS_ZEROS: tl.constexpr, HAS_BIAS: tl.constexpr,
                  HAS_A: tl.constexpr, HAS_B: tl.constexpr,
                  P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr,
                  RUN: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, SPLIT_ROWS: tl.constexpr,
                  PROLOGUE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr,
                  ROW_CHUNK: tl.constexpr):
    """woq_rows for int8 activations: x' (x after its PROLOGUE, as woq_rows) rounded to its row's int8 grid (max |x'|
    / 127, half to even; every program reads the whole row first) and multiplied with the codes in integers, four
    multiply-adds an instruction (dot4: PTX dp4a). The float kernel spends ~4.7 instructions a multiply-add (a shift,
    a mask-and-or and an FMA per code, and x's loads), this one about one per code: int4 codes a word split into its
    even and odd nibbles by two mask-and-ors and a shift (bytes 0-3 of the even word are k = 8 w + 0, 2, 4, 6), two
    dp4a against x's codes in the same order, the zero point times the sum of x's codes taken off, then one
    conversion and one FMA with the group's scale (int8 codes: one dp4a a word, signed, no zero point). Each word's
    integer sum is exact (at most 8 * 127 * 15, or 4 * 127 * 128, below float32's 2^24).
    x's codes are computed once a program, each by one thread (in the loop's layout every thread would round the
    x of all its columns: as many divisions as multiply-adds, measured slower than the float kernel), and stored as
    bytes in x_codes [rows, K] in the order the words take them (int4: word 2 w the even k of code word w, word
    2 w + 1 the odd ones); every program of a split writes the same bytes there, and reads them back as int32 words
    after a barrier. The row's step multiplies the finished sum. Splits: woq_split_sum; the end: woq_finish."""
    block = tl.program_id(0)
    part = tl.program_id(1)
    row = tl.program_id(2).to(tl.int64)
    PER_WORD: tl.constexpr = 32 // BITS
    WORDS: tl.constexpr = RUN // PER_WORD
    n, n_ok, n64, w, word_begin, word_end = woq_program_slice(block, part, N, k_words, split_words, BLOCK_N, WORDS)
    words, scale, zero = dp4a_run_weights(words_ptr, scales_ptr, zeros_ptr, n64, n_ok, w, word_begin, word_end,
                                          k_words, groups, group_size, BITS, ZERO, HAS_ZEROS, PER_WORD)
    if GDC:
        tl.extra.cuda.gdc_wait()
    x_row = x_ptr + row * x_row_stride
    inv_rms, row_scale = woq_row_scan(x_row, norm_ptr, K, eps, PROLOGUE, HAS_NORM_WEIGHT, True, ROW_CHUNK)
    codes_row = x_codes_ptr + row * K
    CODES_CHUNK: tl.constexpr = 512
    for k0 in range(word_begin * PER_WORD, word_end * PER_WORD, CODES_CHUNK):
        k = k0 + tl.arange(0, CODES_CHUNK)
        inside = k < word_end * PER_WORD
        x = woq_input(x_row, norm_ptr, tl.where(inside, k, 0), K, inv_rms, PROLOGUE, HAS_NORM_WEIGHT)
        code = round_half_even_small(tl.math.div_rn(x, row_scale)).to(tl.int8)
        if BITS == 4:
            at = (k // 8) * 8 + (k % 2) * 4 + (k % 8) // 2
        else:
            at = k
        tl.store(codes_row + at, code, mask=inside)
    tl.debug_barrier()  # every thread's codes are stored before any thread reads them as words
    x_words = codes_row.to(tl.pointer_type(tl.int32))
    ones = tl.full([WORDS], 0x01010101, tl.int32)
    acc = tl.zeros([BLOCK_N, WORDS], tl.float32)
    for word in range(word_begin, word_end, WORDS):
        next_words, next_scale, next_zero = dp4a_run_weights(
            words_ptr, scales_ptr, zeros_ptr, n64, n_ok, w, word + WORDS, word_end, k_words, groups, group_size,
            BITS, ZERO, HAS_ZEROS, PER_WORD)
        dots = tl.zeros([BLOCK_N, WORDS], tl.int32)
        if BITS == 4:
            x_even = tl.load(x_words + 2 * (word + w))
            x_odd = tl.load(x_words + 2 * (word + w) + 1)
            x_sum = dot4(ones, x_odd, dot4(ones, x_even, tl.zeros([WORDS], tl.int32), False, ASM), False, ASM)
            dots = dot4(words & 0x0F0F0F0F, tl.broadcast_to(x_even[None, :], (BLOCK_N, WORDS)), dots, False, ASM)
            dots = dot4((words >> 4) & 0x0F0F0F0F, tl.broadcast_to(x_odd[None, :], (BLOCK_N, WORDS)), dots, False,
                        ASM)
            dots -= zero[:, None] * x_sum[None, :]
        else:
            x_bytes = tl.load(x_words + word + w)
            dots = dot4(words, tl.broadcast_to(x_bytes[None, :], (BLOCK_N, WORDS)), dots, True, ASM)
        acc += dots.to(tl.float32) * scale[:, None]
        words, scale, zero = next_words, next_scale, next_zero
    if GDC:
        tl.extra.cuda.gdc_launch_dependents()
    y, last = woq_split_sum(tl.sum(acc, axis=1) * row_scale, row, n, n_ok, N, part, splits, work_ptr, ticket_ptr,
                            SPLIT, SPLIT_ROWS)
    if last:
        woq_finish(y, row, n, n_ok, N, bias_ptr, a_ptr, b_ptr, out_ptr, a_row_stride, a_col_stride, b_row_stride,
                   b_col_stride, HAS_BIAS, HAS_A, HAS_B, P0, P1, P2, P3)


@triton.jit
def dp4a_run_weights(words_ptr, scales_ptr, zeros_ptr, n64, n_ok, w, word, end_word, k_words, groups, group_size,
                     BITS: tl.constexpr, ZERO: tl.constexpr, HAS_ZEROS: tl.constexpr, PER_WORD: tl.constexpr):
    """woq_run_weights for woq_rows_dp4a: the run's codes as stored (int32 words), the group's scales (0 past
    end_word, so a run past the end adds nothing) and its zero points as integers (int8 codes: 0)."""
    live = n_ok & (n64 * 0 + word < end_word)  # (tensors: the interpreter wants tensor masks)
    group = word * PER_WORD // group_size
    scale = tl.load(scales_ptr + n64 * groups + group, mask=live, other=0.0)
    if BITS == 8:
        zero = tl.zeros(n64.shape, tl.int32)
    elif HAS_ZEROS:
        zero = tl.load(zeros_ptr + n64 * groups + group, mask=live, other=0).to(tl.int32)
    else:
        zero = tl.full(n64.shape, ZERO, tl.int32)
    words = tl.load(words_ptr + n64[:, None] * k_words + (word + w)[None, :], mask=live[:, None], other=0)
    return words, scale, zero


@triton.jit
def woq_split_sum(y, row, n, n_ok, N, part, splits, work_ptr, ticket_ptr, SPLIT: tl.constexpr,
                  SPLIT_ROWS: tl.constexpr):
    """(the column block's sums, whether this program finishes it) for a woq_rows / woq_rows_dp4a program with
    partial sums y of its column block. SPLIT (splits > 1): each program stores its partial sums in work [splits,
    rows, N]; the last program of a column block and row to finish (counted in ticket, which it resets) reads them
    SPLIT_ROWS at a time ([SPLIT_ROWS, BLOCK_N] a load, a power of two up to 32: one trip to L2 for up to 32
    splits, not one per split) and adds them in an order fixed by the compiled kernel (the same sum every call);
    it alone finishes. Without SPLIT every program finishes its own."""
    if SPLIT:
        block = tl.program_id(0)
        rows = tl.num_programs(2)
        slot = row * N + n
        tl.store(work_ptr + part * rows * N + slot, y, mask=n_ok)
        tl.debug_barrier()  # every thread's partial is written before the ticket is taken
        ticket = tl.atomic_add(ticket_ptr + row * tl.num_programs(0) + block, 1, sem="acq_rel")
        last = ticket == splits - 1
        if last:
            y = tl.zeros(y.shape, tl.float32)
            for j0 in range(0, splits, SPLIT_ROWS):  # .cg: from L2, where the other programs' partials are
                j = j0 + tl.arange(0, SPLIT_ROWS)
                parts = tl.load(work_ptr + (j * rows * N)[:, None] + slot[None, :],
                                mask=(j < splits)[:, None] & n_ok[None, :], other=0.0, cache_modifier=".cg")
                y += tl.sum(parts, axis=0)
            tl.atomic_xchg(ticket_ptr + row * tl.num_programs(0) + block, 0)
        return y, last
    else:
        return y, True


@triton.jit
def woq_rope_finish(y, row, n, n_ok, bias_ptr, cos_ptr, sin_ptr, table_batch, table_seq, position_ptr, q_out_ptr,
                    key_ptr, value_ptr, seq, heads, kv_heads, capacity, HAS_BIAS: tl.constexpr, HALF: tl.constexpr):
    """woq_rows' end for one row of a merged q/k/v projection (ir/ops/woq_linear_rope_kv_write.py), whose column
    block holds whole heads of 2 HALF (the launcher checks): the bias, one rounding to the projection's dtype (q's),
    then rope_kv_write_heads' work on the heads in registers: q and k rotated, x * cos + cat(-x2, x1) * sin in
    float32, q into q_out [b, heads, seq, d], k and v into the caches [b, kv_heads, capacity, d] at position +
    token, each rounded once to its destination's dtype. row: token t of batch b, row = b * seq + t."""
    if HAS_BIAS:
        y = y + tl.load(bias_ptr + n, mask=n_ok, other=0.0)
    y = y.to(q_out_ptr.dtype.element_ty).to(tl.float32)  # as the projection node stored it
    H: tl.constexpr = y.shape[0] // (2 * HALF)  # heads in the block
    x1, x2 = tl.split(tl.permute(tl.reshape(y, [H, 2, HALF]), (0, 2, 1)))  # each head's halves, [H, HALF]
    head = (tl.program_id(0) * H + tl.arange(0, H)).to(tl.int64)  # of the q | k | v heads
    b = row // seq
    t = row % seq
    lo = tl.arange(0, HALF)
    table = b * table_batch + t * table_seq
    c1 = tl.load(cos_ptr + table + lo).to(tl.float32)[None, :]
    c2 = tl.load(cos_ptr + table + HALF + lo).to(tl.float32)[None, :]
    s1 = tl.load(sin_ptr + table + lo).to(tl.float32)[None, :]
    s2 = tl.load(sin_ptr + table + HALF + lo).to(tl.float32)[None, :]
    rotated = (head < heads + kv_heads)[:, None]  # q and k; v is copied
    y1 = tl.where(rotated, x1 * c1 - x2 * s1, x1)
    y2 = tl.where(rotated, x2 * c2 + x1 * s2, x2)
    position = tl.load(position_ptr) + t
    is_q = (head < heads)[:, None]
    is_k = ((head >= heads) & (head < heads + kv_heads))[:, None]
    is_v = ((head >= heads + kv_heads) & (head < heads + 2 * kv_heads))[:, None]
    q_dst = q_out_ptr + (((b * heads + head) * seq + t) * 2 * HALF)[:, None] + lo[None, :]
    tl.store(q_dst, y1.to(q_dst.dtype.element_ty), mask=is_q)
    tl.store(q_dst + HALF, y2.to(q_dst.dtype.element_ty), mask=is_q)
    k_dst = key_ptr + (((b * kv_heads + head - heads) * capacity + position) * 2 * HALF)[:, None] + lo[None, :]
    tl.store(k_dst, y1.to(k_dst.dtype.element_ty), mask=is_k)
    tl.store(k_dst + HALF, y2.to(k_dst.dtype.element_ty), mask=is_k)
    v_dst = value_ptr + (((b * kv_heads + head - heads - kv_heads) * capacity + position) * 2 * HALF)[:, None] \
        + lo[None, :]
    tl.store(v_dst, y1.to(v_dst.dtype.element_ty), mask=is_v)
    tl.store(v_dst + HALF, y2.to(v_dst.dtype.element_ty), mask=is_v)


@triton.jit
def woq_finish(y, row, n, n_ok, N, bias_ptr, a_ptr, b_ptr, out_ptr, a_row_stride, a_col_stride,
               b_row_stride, b_col_stride, HAS_BIAS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
               P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr):
    """woq_rows' end for one row: the bias, the post-ops and one rounding to out's dtype."""
    if HAS_BIAS:
        y = y + tl.load(bias_ptr + n, mask=n_ok, other=0.0)
    a = 0.0
    b = 0.0
    if HAS_A:
        a = tl.load(a_ptr + row * a_row_stride + n * a_col_stride, mask=n_ok, other=0.0).to(tl.float32)
    if HAS_B:
        b = tl.load(b_ptr + row * b_row_stride + n * b_col_stride, mask=n_ok, other=0.0).to(tl.float32)
    y = post_op(y, P0, a, b)
    y = post_op(y, P1, a, b)
    y = post_op(y, P2, a, b)
    y = post_op(y, P3, a, b)
    tl.store(out_ptr + row * N + n, y.to(out_ptr.dtype.element_ty), mask=n_ok)


@triton.jit
def attention_rows(q_ptr, k_ptr, v_ptr, mask_ptr, out_ptr, work_ptr, ticket_ptr,
                   q_sb, q_sh, q_sl, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, m_sb, m_sh, m_sl, m_ss, o_sb, o_sh, o_sl,
                   kv_heads, L, S, s_split, splits, scale,
                   GROUP: tl.constexpr, M: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BLOCK_S: tl.constexpr,
                   MASK: tl.constexpr, SPLITS: tl.constexpr, HALF: tl.constexpr, ROWS: tl.constexpr,
                   R: tl.constexpr, PARTIALS: tl.constexpr, GDC: tl.constexpr, PREFETCH: tl.constexpr):
    """softmax(q k^T * scale + mask) v for the few query rows of a decode step (ir/ops/sdpa.py): program (i, j)
    takes the GROUP query heads that share key/value head i % kv_heads of batch i // kv_heads, all L rows of them
    (M >= GROUP * L rows, padded for tl.dot) over the j-th s_split keys, with a running max and sum in float32
    (online softmax). HALF (16-bit q, k, v): the products on tensor cores from the stored values, the softmax
    weights rounded to v's dtype for the second product (as flash attention does); else float32 FMA. MASK: 0
    none, 1 bool (True keeps), 2 additive. SPLITS > 1 (a power of two >= splits): each program stores the
    weighted values, max and sum of its R real rows (R, a power of two >= GROUP * L: the padding of M is not
    stored) in work; the last of a head group's programs to finish (ticket, which it resets) reads all of them at
    once and combines them. work holds the values first, rows of DV floats (16-byte aligned: whole-vector loads),
    then the maxima and the sums, each [groups, SPLITS, R]. A row whose keys are all removed gives 0 (the op's rule).
    ROWS: k and v are int8 rows (ir/ops/_kv_int8.py: D or DV codes, then a float32 scale): the products run on
    the codes (exact in any float type), a key row's scale multiplies its scores, a value row's its softmax
    weights, as the CPU's decode_attention does.
    PARTIALS: every program stores its partials (whatever SPLITS) and nothing is combined here: the output
    projection after it combines them as it reads its input (attention_weights, sdpa_woq_linear).
    GDC (programmatic dependent launch, as woq_rows): a program waits for the kernel before it (the q/k/v
    projection that wrote q and the cache's new row) before it reads anything, and lets the next kernel launch once
    its keys are done (that kernel reads nothing of this one's before its own wait). PREFETCH (with GDC; rows of k
    and of v each contiguous, 16-byte aligned: the launcher checks): before the wait it asks for its keys' k and v
    rows to be brought into L2 (l2_prefetch: one range each), the new row included (a hint: it is read after the
    wait, from L2, where the projection wrote it)."""
    group = tl.program_id(0)
    part = tl.program_id(1)
    b = (group // kv_heads).to(tl.int64)
    kvh = (group % kv_heads).to(tl.int64)
    if PREFETCH:
        first = part * s_split
        count = tl.maximum(tl.minimum(S, first + s_split) - first, 0)
        two = tl.arange(0, 2)  # (element 0 asks for the k rows, element 1 for the v rows)
        k_start = (k_ptr + b * k_sb + kvh * k_sh + first * k_ss).to(tl.int64)
        v_start = (v_ptr + b * v_sb + kvh * v_sh + first * v_ss).to(tl.int64)
        row_bytes = tl.where(two == 0, D * (k_ptr.dtype.element_ty.primitive_bitwidth // 8),
                             DV * (v_ptr.dtype.element_ty.primitive_bitwidth // 8))
        l2_prefetch(tl.where(two == 0, k_start, v_start), (count * row_bytes).to(tl.int32), two * 0 + count > 0)
    if GDC:
        tl.extra.cuda.gdc_wait()
    i = tl.arange(0, M)
    row_ok = i < GROUP * L
    head = kvh * GROUP + i // L
    line = i % L
    d = tl.arange(0, D)
    dv = tl.arange(0, DV)
    q = tl.load(q_ptr + b * q_sb + head[:, None] * q_sh + line[:, None] * q_sl + d[None, :], mask=row_ok[:, None],
                other=0.0)
    if not HALF:
        q = q.to(tl.float32)
    top = tl.full([M], float("-inf"), tl.float32)
    total = tl.zeros([M], tl.float32)
    acc = tl.zeros([M, DV], tl.float32)
    s_begin = part * s_split
    s_end = tl.minimum(S, s_begin + s_split)
    for s0 in range(s_begin, s_end, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        s_ok = s < s_end
        k_rows = k_ptr + b * k_sb + kvh * k_sh + s * k_ss
        v_rows = v_ptr + b * v_sb + kvh * v_sh + s * v_ss
        if ROWS:  # codes as q's type (exact), each key row's scale on its scores
            k = row_codes(k_rows, s_ok, D).to(q.dtype)
            v = row_codes(v_rows, s_ok, DV)
            key_scale = tl.load((k_rows + D).to(tl.pointer_type(tl.float32)), mask=s_ok, other=0.0)
            value_scale = tl.load((v_rows + DV).to(tl.pointer_type(tl.float32)), mask=s_ok, other=0.0)
        else:
            k = tl.load(k_rows[:, None] + d[None, :], mask=s_ok[:, None], other=0.0)
            v = tl.load(v_rows[:, None] + dv[None, :], mask=s_ok[:, None], other=0.0)
        where = b * m_sb + head[:, None] * m_sh + line[:, None] * m_sl + s[None, :] * m_ss
        inside = row_ok[:, None] & s_ok[None, :]
        if HALF:
            scores = tl.dot(q, tl.trans(k))
        else:
            scores = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        if ROWS:
            scores = scores * (key_scale * scale)[None, :]
        else:
            scores = scores * scale
        if MASK == 1:
            keep = tl.load(mask_ptr + where, mask=inside, other=0)
            scores = tl.where(keep != 0, scores, float("-inf"))
        elif MASK == 2:
            scores += tl.load(mask_ptr + where, mask=inside, other=0.0).to(tl.float32)
        scores = tl.where(s_ok[None, :], scores, float("-inf"))
        new_top = tl.maximum(top, tl.max(scores, axis=1))
        base = tl.where(new_top == float("-inf"), 0.0, new_top)  # no key yet: exp(-inf - 0) = 0, never NaN
        p = tl.exp(scores - base[:, None])
        rescale = tl.exp(top - base)
        total = total * rescale + tl.sum(p, axis=1)
        weights = p
        if ROWS:  # each value row's scale on its softmax weights; the codes as q's type
            weights = p * value_scale[None, :]
            v = v.to(q.dtype)
        if HALF:
            acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)
        else:
            acc = acc * rescale[:, None] + tl.dot(weights, v.to(tl.float32), input_precision="ieee")
        top = new_top
    if GDC:
        tl.extra.cuda.gdc_launch_dependents()
    if SPLITS > 1 or PARTIALS:
        stats = tl.num_programs(0) * SPLITS * R  # rows of partials: the maxima start at stats * DV, the sums after
        row = (group * SPLITS + part) * R + i  # (rows i >= R are padding: row_ok masks them)
        tl.store(work_ptr + row[:, None] * DV + dv[None, :], acc, mask=row_ok[:, None])
        tl.store(work_ptr + stats * DV + row, top, mask=row_ok)
        tl.store(work_ptr + stats * (DV + 1) + row, total, mask=row_ok)
        if not PARTIALS:
            tl.debug_barrier()  # every thread's partial is written before the ticket is taken
            ticket = tl.atomic_add(ticket_ptr + group, 1, sem="acq_rel")
            if ticket == splits - 1:
                j = tl.arange(0, SPLITS)
                r = tl.arange(0, R)
                r_ok = r < GROUP * L
                rows = (group * SPLITS + j[:, None]) * R + r[None, :]  # [SPLITS, R]
                used = (j < splits)[:, None] & r_ok[None, :]
                # .cg: from L2, where the other programs' partials are
                tops = tl.load(work_ptr + stats * DV + rows, mask=used, other=float("-inf"), cache_modifier=".cg")
                sums = tl.load(work_ptr + stats * (DV + 1) + rows, mask=used, other=0.0, cache_modifier=".cg")
                accs = tl.load(work_ptr + rows[:, :, None] * DV + dv[None, None, :], mask=used[:, :, None], other=0.0,
                               cache_modifier=".cg")
                best = tl.max(tops, axis=0)
                shift = tl.where(best == float("-inf"), 0.0, best)
                weight = tl.exp(tops - shift[None, :])
                summed = tl.sum(weight * sums, axis=0)
                combined = tl.sum(weight[:, :, None] * accs, axis=0)
                tl.atomic_xchg(ticket_ptr + group, 0)
                attention_finish(combined, summed, b, kvh * GROUP + r // L, r % L, r_ok, dv, out_ptr, o_sb, o_sh, o_sl)
    else:
        attention_finish(acc, total, b, head, line, row_ok, dv, out_ptr, o_sb, o_sh, o_sl)


@triton.jit
def row_codes(rows, ok, D: tl.constexpr):
    """The D int8 codes of int8 KV cache rows (rows: a pointer to each row, 4-byte aligned) as int32 [rows, D], read
    as 32-bit words: a row of 68 bytes is no multiple of 16, so byte loads would be one instruction a code."""
    words = tl.load(rows.to(tl.pointer_type(tl.int32))[:, None] + tl.arange(0, D // 4)[None, :], mask=ok[:, None],
                    other=0)
    b0, b1, b2, b3 = (words << 24) >> 24, (words << 16) >> 24, (words << 8) >> 24, words >> 24  # (little-endian)
    # [rows, D / 4, 2, 2] with byte 2a + c of word j at [j, a, c]: in row order once flattened
    return tl.reshape(tl.join(tl.join(b0, b2), tl.join(b1, b3)), [words.shape[0], D])


@triton.jit
def attention_finish(acc, total, b, head, line, row_ok, dv, out_ptr, o_sb, o_sh, o_sl):
    """acc / total rounded once to out's dtype; 0 where a row kept no key (total 0)."""
    y = tl.where(total[:, None] > 0, acc / tl.where(total > 0, total, 1.0)[:, None], 0.0)
    tl.store(out_ptr + b * o_sb + head[:, None] * o_sh + line[:, None] * o_sl + dv[None, :],
             y.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def silu_mul_rows(a_ptr, b_ptr, out_ptr, n, a_row_stride, b_row_stride, BLOCK: tl.constexpr):
    """silu(a) * b for BLOCK columns of one row (grid: rows, column blocks), in float32, rounded once to out's
    dtype (ir/ops/silu_mul.py); a and b rows at their own strides (the halves of a merged gate/up output)."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = c < n
    a = tl.load(a_ptr + row * a_row_stride + c, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * b_row_stride + c, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n + c, (silu(a) * b).to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def table_row(table_ptr, position_ptr, out_ptr, rows, row_words, BLOCK: tl.constexpr):
    """out [row_words] = row p of table [rows, row_words] (int32 words), p read from position_ptr and clamped into
    the table (backends/cuda/graphs.py: a position table's gather, runtime/position_table.py)."""
    p = tl.minimum(tl.maximum(tl.load(position_ptr), 0), rows - 1)
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < row_words
    tl.store(out_ptr + at, tl.load(table_ptr + p * row_words + at, mask=inside), mask=inside)


@triton.jit
def embedding_rows(ids_ptr, weight_ptr, out_ptr, flag_ptr, rows, width, BLOCK: tl.constexpr):
    """out[i, :] = weight[id_i, :] (program (i, j): BLOCK columns of row i), id_i clamped into [0, rows); an id
    outside sets flag (a guard's, backends/cuda/guards.py) to 1."""
    i = tl.program_id(0)
    wanted = tl.load(ids_ptr + i).to(tl.int64)
    bad = (wanted < 0) | (wanted >= rows)
    row = tl.minimum(tl.maximum(wanted, 0), rows - 1)
    if bad:
        tl.store(flag_ptr, 1)
    at = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = at < width
    values = tl.load(weight_ptr + row * width + at, mask=inside)
    tl.store(out_ptr + i.to(tl.int64) * width + at, values, mask=inside)


@triton.jit
def greedy_feed(logits_ptr, row_stride, vocab, ids_ptr, history_ptr, position_ptr, rows, BATCH: tl.constexpr,
                BLOCK: tl.constexpr):
    """A greedy decode step's end, inside its CUDA graph (backends/cuda/graphs.py, GreedyChain): per row b of logits
    [BATCH, vocab] (row stride row_stride, columns contiguous) the arg-max, the lowest id on ties and NaN counting as
    the largest value (as torch.argmax); written as the next step's ids [BATCH] and as history [rows, BATCH] row p,
    p = *position (clamped into [0, rows)); then *position = p + 1. One program: the position moves on after every
    row has been written."""
    p = tl.load(position_ptr)
    slot = tl.minimum(tl.maximum(p, 0), rows - 1)
    for b in tl.static_range(BATCH):
        row = logits_ptr + b * row_stride  # (batch <= 4 rows of one vocabulary: no int32 overflow)
        best_v = tl.full([], -float("inf"), tl.float32)
        best_i = tl.full([], 0, tl.int32)
        for start in range(0, vocab, BLOCK):
            at = start + tl.arange(0, BLOCK)
            v = tl.load(row + at, mask=at < vocab, other=-float("inf")).to(tl.float32)
            v = tl.where(v != v, float("inf"), v)
            m = tl.max(v, 0)
            i = tl.argmax(v, 0)  # (the first of the block's largest)
            take = m > best_v  # strictly: an equal value later in the row is not taken
            best_i = tl.where(take, start + i, best_i)
            best_v = tl.where(take, m, best_v)
        tl.store(ids_ptr + b, best_i.to(tl.int64))
        tl.store(history_ptr + slot * BATCH + b, best_i.to(tl.int64))
    tl.store(position_ptr, p + 1)
