// int8_gemm (args.h): an exact uint8 x int8 GEMM for AVX2 CPUs without VNNI.
//
// Why not vpmaddubsw: it sums pairs of u8 * s8 products into int16 with saturation, and
// 2 * 255 * 127 does not fit; that is the error oneDNN's int8 kernels show on such CPUs. Here
// both operands are widened to int16 (activations minus their zero point, so [-255, 255]) and
// vpmaddwd sums pairs into int32: exact. One vpmaddwd does 16 multiply-adds, twice what one
// fp32 FMA does, but each needs a vpaddd on the same ports: measured, 1.28x the fp32 peak.
//
// Blocking: the activations of up to kActivationBytes (a block of rows, all of k; blocks of equal
// size, as many as a multiple of the threads) are widened
// once into a per-thread buffer that stays in L2, then every 16-column weight panel the thread
// owns runs over it in tiles of 4 rows x 16 columns: 8 accumulators in registers for the whole
// of k, two weight vectors and one broadcast per pair of k (6 rows needed 12 accumulators plus
// the broadcasts gcc hoists: more than AVX2's 16 registers, and the spills halved the rate). A panel is 64 bytes per pair of k,
// streamed from L2/L3 at ~11 bytes a cycle, well inside what the caches deliver; the first tile
// of a panel prefetches the next. The epilogue (scale, bias, residual, relu, GELU, column factors,
// output conversion) runs on the tile while it is in registers.
#include <immintrin.h>

#include "gelu_erfc.h"
#include "quant.h"

namespace ipxc {
namespace IPXC_NS {

constexpr int kMR = 4;                               // rows per register tile (8 accumulators: 6 spilled, 16 ymm)
constexpr int kNR = 16;                              // columns per tile (two vectors of 8 int32)
constexpr int64_t kActivationBytes = 192 * 1024;     // widened rows kept per thread (in L2)
constexpr int64_t kFewRowsActivationBytes = 512 * 1024;  // the same when the weights outweigh the rows
constexpr int64_t kMinMacsPerTask = 1 << 18;         // below this a task is not worth a thread

// n uint8 values minus the zero point as int16.
static inline void widen(const uint8_t* src, int16_t* d, int64_t n, int32_t zero_point) {
    const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(zero_point));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i wide = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_sub_epi16(wide, zp));
    }
    for (; i < n; ++i) d[i] = static_cast<int16_t>(static_cast<int32_t>(src[i]) - zero_point);
}

// Rows [r0, r0 + rows) of a (or of the convolution's patches), minus the zero point, as int16 rows
// of k2 (k rounded up to even; the pad is 0, so it adds nothing).
static void widen_rows(const Int8GemmArgs& g, int64_t r0, int64_t rows, int64_t k2, int16_t* dst) {
    for (int64_t r = 0; r < rows; ++r) {
        int16_t* d = dst + r * k2;
        if (!g.conv) {
            widen(g.a + (r0 + r) * g.a_stride, d, g.k, g.a_zero_point);
        } else {
            const int64_t pixel = r0 + r, per_image = g.out_h * g.out_w;
            const int64_t b = pixel / per_image, oh = (pixel % per_image) / g.out_w, ow = pixel % g.out_w;
            const uint8_t* image = g.a + b * g.in_h * g.in_w * g.channels;
            const int64_t iw0 = ow * g.stride_w - g.pad_w;
            const bool row_inside = g.dilation_w == 1 && iw0 >= 0 && iw0 + g.kernel_w <= g.in_w;
            for (int64_t i = 0; i < g.kernel_h; ++i) {
                const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
                if (row_inside && ih >= 0 && ih < g.in_h) {  // the kernel's row of taps is one run of the image
                    widen(image + (ih * g.in_w + iw0) * g.channels, d, g.kernel_w * g.channels, g.a_zero_point);
                    d += g.kernel_w * g.channels;
                    continue;
                }
                for (int64_t j = 0; j < g.kernel_w; ++j, d += g.channels) {
                    const int64_t iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
                    if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w)
                        std::memset(d, 0, static_cast<size_t>(g.channels) * sizeof(int16_t));
                    else
                        widen(image + (ih * g.in_w + iw) * g.channels, d, g.channels, g.a_zero_point);
                }
            }
            d = dst + r * k2;
        }
        if (k2 > g.k) d[g.k] = 0;
    }
}

// acc[r] += a[r] . panel over all pairs of k, for MR rows. With Prefetch, one line of the next panel is brought
// into L2 per pair (a panel is one line per pair), so the first tile of a panel fetches the next one.
template <int MR, bool Prefetch>
static inline void tile_products(const int16_t* a, int64_t k2, const int16_t* panel, const int16_t* next,
                                 __m256i (&acc)[kMR][2]) {
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const int64_t pairs = k2 / 2;
#pragma GCC unroll 4  // unrolled, gcc schedules the 4 rows better: 105-112 -> 130-140 GMAC/s on 2 Xeon cores capped to AVX2
    for (int64_t p = 0; p < pairs; ++p) {
        if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(next + p * 32), _MM_HINT_T1);
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * 32));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * 32 + 16));
        for (int r = 0; r < MR; ++r) {
            int32_t pair;
            std::memcpy(&pair, a + r * k2 + 2 * p, sizeof pair);
            const __m256i b = _mm256_set1_epi32(pair);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(b, w0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(b, w1));
        }
    }
}

// The epilogue constants of one 16-column block, zero padded past n.
struct ColumnBlock {
    __m256 scale[2], bias[2], multiplier[2];
    int64_t n0 = 0, cols = 0;

    ColumnBlock(const Int8GemmArgs& g, int64_t n0_, int64_t cols_) : n0(n0_), cols(cols_) {
        alignas(32) float s[kNR] = {}, b[kNR] = {}, m[kNR] = {};
        for (int64_t j = 0; j < cols; ++j) {
            s[j] = g.scales[n0 + j];
            b[j] = g.bias ? g.bias[n0 + j] : 0.0f;
            m[j] = g.col_multiplier ? g.col_multiplier[n0 + j] : 1.0f;
        }
        for (int h = 0; h < 2; ++h) {
            scale[h] = _mm256_load_ps(s + 8 * h);
            bias[h] = _mm256_load_ps(b + 8 * h);
            multiplier[h] = _mm256_load_ps(m + 8 * h);
        }
    }
};

// 16 int32 codes (already clamped to the type's range) -> 16 bytes in order.
static inline __m128i pack_codes(__m256i lo, __m256i hi, bool is_unsigned) {
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);  // exact: |codes| < 2^15
    const __m128i w0 = _mm256_castsi256_si128(words), w1 = _mm256_extracti128_si256(words, 1);
    return is_unsigned ? _mm_packus_epi16(w0, w1) : _mm_packs_epi16(w0, w1);
}

// v += the residual's 16 (or cb.cols) values of this row: dequantized uint8 codes, or float32. Full blocks load
// straight from the residual; only a last partial block goes through a zero-padded copy (a memcpy of a run-time
// length is a libc call: once per row and block it tripled the time of ResNet's residual 1x1 convolutions).
static inline void add_residual(const Int8GemmArgs& g, int64_t row, const ColumnBlock& cb, __m256 (&v)[2]) {
    if (g.residual_u8) {
        const uint8_t* src = static_cast<const uint8_t*>(g.residual) + row * g.residual_stride + cb.n0;
        __m128i bytes;
        if (cb.cols == kNR) {
            bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        } else {
            alignas(16) uint8_t codes[kNR] = {};
            std::memcpy(codes, src, static_cast<size_t>(cb.cols));
            bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(codes));
        }
        const __m256 scale = _mm256_set1_ps(g.residual_scale);
        const __m256 zp = _mm256_set1_ps(static_cast<float>(g.residual_zero_point));
        const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
        // (q - zp) * scale, as the reference dequantizes: subtract, then multiply
        v[0] = _mm256_add_ps(v[0], _mm256_mul_ps(_mm256_sub_ps(lo, zp), scale));
        v[1] = _mm256_add_ps(v[1], _mm256_mul_ps(_mm256_sub_ps(hi, zp), scale));
        return;
    }
    const float* src = static_cast<const float*>(g.residual) + row * g.residual_stride + cb.n0;
    if (cb.cols == kNR) {
        v[0] = _mm256_add_ps(v[0], _mm256_loadu_ps(src));
        v[1] = _mm256_add_ps(v[1], _mm256_loadu_ps(src + 8));
        return;
    }
    alignas(32) float r[kNR] = {};
    std::memcpy(r, src, static_cast<size_t>(cb.cols) * sizeof(float));
    v[0] = _mm256_add_ps(v[0], _mm256_load_ps(r));
    v[1] = _mm256_add_ps(v[1], _mm256_load_ps(r + 8));
}

// The erf GELU of 8 floats, the gelu kernel's arithmetic (gelu_erfc.h) in vector registers. NaN stays NaN.
static inline __m256 gelu_erf8(__m256 x) {
    const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kInvSqrt2));
    __m256 p = _mm256_set1_ps(kErfcPoly[0]);
    for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(kErfcPoly[i]));
    p = _mm256_mul_ps(p, p);
    p = _mm256_mul_ps(p, p);
    p = _mm256_mul_ps(p, p);
    p = _mm256_mul_ps(p, p);  // P^16
    const __m256 c = _mm256_div_ps(_mm256_set1_ps(1.0f), p);  // erfc(|x| / sqrt 2)
    const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 e = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), c), c, negative);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), e);
}

// The GELU and the column factors of one row's 16 values. Out of line: inlined, they changed how gcc allocated
// the product loop's registers and the GEMM fell from ~125 to ~92 GMAC/s (2 Xeon cores capped to AVX2).
__attribute__((noinline)) static void gelu_and_factors(const Int8GemmArgs& g, const ColumnBlock& cb, __m256 (&v)[2]) {
    if (g.gelu)
        for (int h = 0; h < 2; ++h) v[h] = gelu_erf8(v[h]);
    if (g.col_multiplier)
        for (int h = 0; h < 2; ++h) v[h] = _mm256_mul_ps(v[h], cb.multiplier[h]);
}

template <int MR>
static inline void store_tile(const Int8GemmArgs& g, int64_t r0, const ColumnBlock& cb, const __m256i (&acc)[kMR][2]) {
    const __m256 zero = _mm256_setzero_ps();
    for (int r = 0; r < MR; ++r) {
        __m256 v[2];
        const int64_t row = r0 + r;
        for (int h = 0; h < 2; ++h) v[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][h]), cb.scale[h], cb.bias[h]);
        if (g.residual) add_residual(g, row, cb, v);
        if (g.relu)
            for (int h = 0; h < 2; ++h) v[h] = _mm256_max_ps(zero, v[h]);  // max(0, NaN) is NaN: NaN stays NaN
        if (g.gelu || g.col_multiplier) gelu_and_factors(g, cb, v);
        if (g.out == GemmOut::f32) {
            float* y = static_cast<float*>(g.y) + row * g.y_stride + cb.n0;
            if (cb.cols == kNR) {
                _mm256_storeu_ps(y, v[0]);
                _mm256_storeu_ps(y + 8, v[1]);
            } else {
                alignas(32) float tmp[kNR];
                _mm256_store_ps(tmp, v[0]);
                _mm256_store_ps(tmp + 8, v[1]);
                std::memcpy(y, tmp, static_cast<size_t>(cb.cols) * sizeof(float));
            }
        } else if (g.out == GemmOut::bf16) {
            alignas(32) float tmp[kNR];
            _mm256_store_ps(tmp, v[0]);
            _mm256_store_ps(tmp + 8, v[1]);
            uint16_t* y = static_cast<uint16_t*>(g.y) + row * g.y_stride + cb.n0;
            for (int64_t j = 0; j < cb.cols; ++j) y[j] = f32_to_bf16(tmp[j]);
        } else {
            // As the quantize kernel: fmaf(v, 1/scale, zp), clamp, round half to even (cvtps2dq in
            // the default rounding mode, exact below 2^22); vmaxps(v, lo) makes NaN lo.
            const bool is_unsigned = g.out == GemmOut::u8;
            const __m256 inv = _mm256_set1_ps(g.out_inv_scale), zp = _mm256_set1_ps(static_cast<float>(g.out_zero_point));
            const __m256 lo = _mm256_set1_ps(is_unsigned ? 0.0f : -128.0f), hi = _mm256_set1_ps(is_unsigned ? 255.0f : 127.0f);
            __m256i codes[2];
            for (int h = 0; h < 2; ++h)
                codes[h] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v[h], inv, zp), lo), hi));
            const __m128i bytes = pack_codes(codes[0], codes[1], is_unsigned);
            uint8_t* y = static_cast<uint8_t*>(g.y) + row * g.y_stride + cb.n0;
            if (cb.cols == kNR) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bytes);
            } else {
                alignas(16) uint8_t tmp[kNR];
                _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
                std::memcpy(y, tmp, static_cast<size_t>(cb.cols));
            }
        }
    }
}

template <int MR>
static inline void tile(const Int8GemmArgs& g, const int16_t* a, int64_t k2, const int16_t* panel, const int16_t* next,
                        int64_t r0, const ColumnBlock& cb) {
    __m256i acc[kMR][2];
    if (next)
        tile_products<MR, true>(a, k2, panel, next, acc);
    else
        tile_products<MR, false>(a, k2, panel, nullptr, acc);
    store_tile<MR>(g, r0, cb, acc);
}

static void int8_gemm(const Int8GemmArgs& g) {
    if (g.m <= 0 || g.n <= 0) return;
    const int64_t k2 = (g.k + 1) & ~int64_t{1};
    const int64_t n_blocks = (g.n + kNR - 1) / kNR;
    const int64_t panel_elems = (k2 / 2) * 32;
    // Rows widened at once: as many as fit kActivationBytes, a multiple of the tile height. Every block of rows
    // streams all the weights again, so when they outweigh the rows (ResNet-50's last stages at batch 1: 49 rows,
    // 4.7 MB of int16 weights) larger blocks pay: 1.49 -> 1.17 ms for a 512-channel 3x3 convolution at 7 x 7.
    const int64_t weight_bytes = n_blocks * panel_elems * 2, row_bytes = g.m * k2 * 2;
    const int64_t budget = 2 * weight_bytes >= row_bytes ? kFewRowsActivationBytes : kActivationBytes;
    int64_t max_rows = budget / (2 * (k2 > 0 ? k2 : 2));
    max_rows = max_rows < kMR ? kMR : max_rows - max_rows % kMR;
    // Blocks of equal size, as many as a multiple of the threads: 1024 rows in blocks of up to 340 had made
    // 340 + 340 + 340 + 4, three tasks of work for two threads (BERT-base b8 +14 %).
    int64_t row_blocks = (g.m + max_rows - 1) / max_rows;
    if (row_blocks > 1 && g.threads > 1 && row_blocks % g.threads) row_blocks += g.threads - row_blocks % g.threads;
    int64_t block_rows = ((g.m + row_blocks - 1) / row_blocks + kMR - 1) / kMR * kMR;
    if (block_rows > g.m) block_rows = g.m;
    row_blocks = (g.m + block_rows - 1) / block_rows;
    // Column chunks so that every thread gets work even when the rows are one block.
    int64_t chunks = (2 * static_cast<int64_t>(g.threads) + row_blocks - 1) / row_blocks;
    chunks = chunks < 1 ? 1 : chunks > n_blocks ? n_blocks : chunks;
    const int64_t blocks_per_chunk = (n_blocks + chunks - 1) / chunks;
    chunks = (n_blocks + blocks_per_chunk - 1) / blocks_per_chunk;
    const int64_t task_macs = block_rows * blocks_per_chunk * kNR * (k2 > 0 ? k2 : 1);
    const int64_t grain = task_macs >= kMinMacsPerTask ? 1 : kMinMacsPerTask / task_macs;

    parallel(row_blocks * chunks, grain, g.threads, [&](int64_t begin, int64_t end) {
        // scratch_floats: a per-thread buffer; int16 rows need half as many floats.
        int16_t* rows = reinterpret_cast<int16_t*>(scratch_floats((block_rows * k2 + 1) / 2 + 8));
        int64_t widened = -1;
        for (int64_t task = begin; task < end; ++task) {
            const int64_t rb = task / chunks, chunk = task % chunks;
            const int64_t r0 = rb * block_rows, count = g.m - r0 < block_rows ? g.m - r0 : block_rows;
            if (rb != widened) {
                widen_rows(g, r0, count, k2, rows);
                widened = rb;
            }
            const int64_t nb_end = (chunk + 1) * blocks_per_chunk < n_blocks ? (chunk + 1) * blocks_per_chunk : n_blocks;
            for (int64_t nb = chunk * blocks_per_chunk; nb < nb_end; ++nb) {
                const int64_t n0 = nb * kNR;
                const ColumnBlock cb(g, n0, g.n - n0 < kNR ? g.n - n0 : kNR);
                const int16_t* panel = g.w + nb * panel_elems;
                const int16_t* following = nb + 1 < nb_end ? panel + panel_elems : nullptr;
                for (int64_t r = 0; r < count; r += kMR) {
                    const int16_t* a = rows + r * k2;
                    const int16_t* next = r == 0 ? following : nullptr;
                    switch (count - r < kMR ? count - r : kMR) {
                        case 1: tile<1>(g, a, k2, panel, next, r0 + r, cb); break;
                        case 2: tile<2>(g, a, k2, panel, next, r0 + r, cb); break;
                        case 3: tile<3>(g, a, k2, panel, next, r0 + r, cb); break;
                        default: tile<4>(g, a, k2, panel, next, r0 + r, cb); break;
                    }
                }
            }
        }
    });
}

IPXC_REGISTER_KERNEL(int8_gemm, int8_gemm);

}  // namespace IPXC_NS
}  // namespace ipxc
