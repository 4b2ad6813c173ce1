// woq_gemv_i8 (args.h, path 3): decode rows against 4-bit weights with integer dot products, for AVX2
// CPUs without VNNI. Numerically different from woq_gemm's float paths: x is quantized per row first.
//
// Why: on AVX2 the float decode path turns every 4-bit code into a float (zero-extend, mask or shift,
// convert) before its FMA, which makes int4 decode compute-bound (~17 GB/s of codes on 2 Xeon cores
// capped to AVX2, against ~27 GB/s of DRAM). Here each row of x is quantized to int8 (symmetric,
// xs = max|x| / 127, xq = round_half_even(x / xs)), and vpmaddubsw multiplies the unsigned codes
// (0..15, the u8 operand, so no sign trick is needed) by pairs of xq and adds the pair: one
// instruction for 32 multiply-adds, exact in int16 (2 * 15 * 127 = 3810; 8 of them still fit, so 8
// byte rows are summed in int16 before widening to int32). Per group, exactly in integers,
// acc = sum xq * q; then y += scale * xs * (acc - zero * sum xq) in float32.
//
// The packed 4-bit layout is woq_gemm's ([n16/16][k/2][16] bytes, a channel's k and k+1 in one byte):
// zero-extended to 16 bits, (t | t << 4) & 0x0F0F puts k's code in the low byte and k+1's in the high
// byte of each channel's word, which is the vpmaddubsw pair layout with the x pair broadcast.
#include <immintrin.h>

#include <cstring>

#include "common.h"
#include "woq_gemm/int8_rows.h"

namespace ipxc {
namespace IPXC_NS {

constexpr int kBlock = 16;
constexpr int kRows = 4;                       // rows per call of the block loop (decode)
constexpr int64_t kPrefetchRows = 128;        // 16-byte rows of codes prefetched ahead (2 KiB), as woq_gemm.cpp
constexpr int kInt16Rows = 8;                  // byte rows summed in int16 before widening: 8 * 3810 < 32768
constexpr int64_t kMinMacsPerTask = 1 << 16;

template <int MR>
static void block_rows(const WoqGemmArgs& g, int64_t blk, const int8_t* xq, const float* xs, const int32_t* xsum) {
    const int64_t gs = g.group_size, groups = g.k / gs, pairs = gs / 2;
    const float* qp = block_qparams(g, blk);
    const uint8_t* wb = static_cast<const uint8_t*>(g.w) + blk * (g.k / 2) * kBlock;
    const __m256i nibbles = _mm256_set1_epi16(0x0F0F);
    alignas(32) float total[MR][kBlock] = {};
    for (int64_t grp = 0; grp < groups; ++grp) {
        __m256i acc[MR][2];
        for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        for (int64_t p0 = 0; p0 < pairs; p0 += kInt16Rows) {
            const int64_t p1 = p0 + kInt16Rows < pairs ? p0 + kInt16Rows : pairs;
            __m256i acc16[MR];
            for (int r = 0; r < MR; ++r) acc16[r] = _mm256_setzero_si256();
            for (int64_t p = p0; p < p1; ++p) {
                const int64_t kk = grp * pairs + p;
                if ((kk & 3) == 0) __builtin_prefetch(wb + (kk + kPrefetchRows) * kBlock);  // as woq_gemm's decode
                const __m256i t = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + kk * kBlock)));
                const __m256i w = _mm256_and_si256(_mm256_or_si256(t, _mm256_slli_epi16(t, 4)), nibbles);
                for (int r = 0; r < MR; ++r) {
                    int16_t pair;
                    std::memcpy(&pair, xq + r * g.k + 2 * kk, sizeof pair);
                    acc16[r] = _mm256_add_epi16(acc16[r], _mm256_maddubs_epi16(w, _mm256_set1_epi16(pair)));
                }
            }
            for (int r = 0; r < MR; ++r) {
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc16[r])));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc16[r], 1)));
            }
        }
        for (int h = 0; h < 2; ++h) {
            const __m256 scale = _mm256_loadu_ps(group_scales(g, qp, grp) + 8 * h);
            const __m256 zero = _mm256_loadu_ps(group_zeros(g, qp, grp) + 8 * h);
            for (int r = 0; r < MR; ++r) {
                // acc - zero * sum xq: both exact integers below 2^24 for groups up to ~8800 inputs
                const __m256 a = _mm256_fnmadd_ps(zero, _mm256_set1_ps(static_cast<float>(xsum[r * groups + grp])),
                                                  _mm256_cvtepi32_ps(acc[r][h]));
                const __m256 t = _mm256_loadu_ps(total[r] + 8 * h);
                _mm256_storeu_ps(total[r] + 8 * h, _mm256_fmadd_ps(_mm256_mul_ps(scale, _mm256_set1_ps(xs[r])), a, t));
            }
        }
    }
    const int64_t n0 = blk * kBlock, cols = g.n - n0 < kBlock ? g.n - n0 : kBlock;
    for (int r = 0; r < MR; ++r) {
        float* y = g.y + r * g.y_stride + n0;
        for (int64_t j = 0; j < cols; ++j) y[j] = total[r][j] + (g.bias ? g.bias[n0 + j] : 0.0f);
        add_residual(g, r, r + 1, n0, cols);
    }
}

static void rows_of_four(const WoqGemmArgs& g) {
    const int64_t groups = g.k / g.group_size;
    const int64_t blocks = (g.n + kBlock - 1) / kBlock;
    int8_t* xq = new int8_t[static_cast<size_t>(g.m * g.k)];  // bad_alloc reaches Python as MemoryError
    int32_t* xsum = new int32_t[static_cast<size_t>(g.m * groups)];
    float xs[kRows];
    quantize_rows(g.x, g.x_stride, g.m, g.k, g.threads, xq, xs, false, g.group_size, xsum);
    const int64_t work = g.k * kBlock * g.m;
    const int64_t grain = work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work;
    parallel(blocks, grain, g.threads, [&](int64_t begin, int64_t end) {
        for (int64_t blk = begin; blk < end; ++blk) {
            switch (g.m) {
                case 1: block_rows<1>(g, blk, xq, xs, xsum); break;
                case 2: block_rows<2>(g, blk, xq, xs, xsum); break;
                case 3: block_rows<3>(g, blk, xq, xs, xsum); break;
                default: block_rows<4>(g, blk, xq, xs, xsum); break;
            }
        }
    }, stream_chunk(g.k * kBlock / 2));
    delete[] xsum;
    delete[] xq;
}

static void woq_gemv_i8(const WoqGemmArgs& g) {
    for (int64_t r0 = 0; r0 < g.m; r0 += kRows) {
        WoqGemmArgs part = g;
        part.x = g.x + r0 * g.x_stride;
        part.y = g.y + r0 * g.y_stride;
        part.m = g.m - r0 < kRows ? g.m - r0 : kRows;
        rows_of_four(part);
    }
}

IPXC_REGISTER_KERNEL(woq_gemv_i8, woq_gemv_i8);

}  // namespace IPXC_NS
}  // namespace ipxc
