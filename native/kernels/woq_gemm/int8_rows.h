// Rows of x rounded to int8, and the row-chunk loop, shared by the integer paths of woq_gemm
// (woq_gemv_i8.cpp, woq_gemm_w8a8.cpp, woq_gemm_w4a8.cpp).
// Included only by files compiled once per ISA level (AVX2 and up): everything is static in IPXC_NS.
#pragma once

#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace ipxc {
namespace IPXC_NS {

// Sums of a row's codes per group of `group_size` (the zero-point term of 4-bit codes).
static inline void group_sums(const int8_t* q, int64_t k, int64_t group_size, int32_t* sums) {
    for (int64_t grp = 0; grp < k / group_size; ++grp) {
        int32_t s = 0;
        for (int64_t i = grp * group_size; i < (grp + 1) * group_size; ++i) s += q[i];
        sums[grp] = s;
    }
}

// x row -> int8 codes, xs = max|x| / 127 (1 for a row of zeros), q = round_half_even(x / xs) (a true
// division, as torch.round(x / xs)); returns xs, or NaN when the row holds a NaN or an infinity (the
// op's meaning then gives a row of NaN: the caller writes it, q is left undefined). Offset: the codes are
// stored + 128 as unsigned bytes (the operand vpdpbusd multiplies; flipping the sign bit adds 128).
static inline float quantize_row_int8(const float* x, int64_t k, int8_t* q, bool offset = false) {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), largest = _mm256_set1_ps(FLT_MAX);
    __m256 amax8 = _mm256_setzero_ps(), non_finite = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude);
        non_finite = _mm256_or_ps(non_finite, _mm256_cmp_ps(a, largest, _CMP_NLE_UQ));  // NaN or infinity
        amax8 = _mm256_max_ps(amax8, a);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, amax8);
    float amax = 0.0f;
    bool finite = _mm256_movemask_ps(non_finite) == 0;
    for (float lane : lanes) amax = lane > amax ? lane : amax;
    for (; i < k; ++i) {
        const float a = std::fabs(x[i]);
        finite &= a <= FLT_MAX;  // false for NaN and infinity
        amax = a > amax ? a : amax;
    }
    if (!finite) return NAN;
    const float xs = amax > 0.0f ? amax / 127.0f : 1.0f;
    const __m256 s = _mm256_set1_ps(xs);
    const __m128i flip = _mm_set1_epi8(offset ? -128 : 0);
    for (i = 0; i + 8 <= k; i += 8) {
        const __m256i v = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s),
                                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_xor_si128(_mm_packs_epi16(w16, w16), flip));  // |v| <= 127
    }
    for (; i < k; ++i) q[i] = static_cast<int8_t>(static_cast<int>(std::nearbyint(x[i] / xs)) ^ (offset ? -128 : 0));
    return xs;
}

// quantize_row_int8 for one row, with the op's meaning for non-finite rows kept: xs NaN and q all zero (all 128
// with the offset), so every output of the row is NaN (codes * NaN) and the integer dot products stay defined.
static inline float quantize_row_or_nan(const float* x, int64_t k, int8_t* q, bool offset = false) {
    const float xs = quantize_row_int8(x, k, q, offset);
    if (std::isnan(xs)) std::memset(q, offset ? 0x80 : 0, static_cast<size_t>(k));
    return xs;
}

// Every row of x [m, k] (row r at x + r * x_stride) rounded by quantize_row_or_nan into q [m, k] and xs [m],
// and then, for 4-bit weights, its group sums (sums: [m, k / group_size], or null): one pass a row, the rows
// split over the threads (a 512-token prompt's down projection holds 2.5 M values).
static inline void quantize_rows(const float* x, int64_t x_stride, int64_t m, int64_t k, int threads, int8_t* q,
                                 float* xs, bool offset = false, int64_t group_size = 0, int32_t* sums = nullptr) {
    const auto rows = [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            xs[r] = quantize_row_or_nan(x + r * x_stride, k, q + r * k, offset);
            if (sums != nullptr) group_sums(q + r * k, k, group_size, sums + r * (k / group_size));
        }
    };
    if (m == 1) return rows(0, 1);  // decode: no thread hand-off for one row
    parallel(m, k >= 16384 ? 1 : 16384 / k, threads, rows);
}

// Calls f(r0, std::integral_constant<int, R>{}) for rows r0 .. r0+R-1 of m, R = 4 but for the last chunk, so a
// kernel's row count is a compile-time constant:
//   for_each_row_quad(m, [&](int64_t r0, auto rows) { run<decltype(rows)::value>(r0); });
template <class F>
static inline void for_each_row_quad(int64_t m, F&& f) {
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
        switch (m - r0 < 4 ? m - r0 : 4) {
            case 1: f(r0, std::integral_constant<int, 1>{}); break;
            case 2: f(r0, std::integral_constant<int, 2>{}); break;
            case 3: f(r0, std::integral_constant<int, 3>{}); break;
            default: f(r0, std::integral_constant<int, 4>{}); break;
        }
    }
}

// The same in tiles of 8 rows (then 4, 3, 2, 1 for the rest): prefill, where the register file holds 8 rows'
// accumulators and a weight vector then feeds 8 dot products.
template <class F>
static inline void for_each_row_octet(int64_t m, F&& f) {
    int64_t r0 = 0;
    for (; r0 + 8 <= m; r0 += 8) f(r0, std::integral_constant<int, 8>{});
    if (r0 < m) for_each_row_quad(m - r0, [&](int64_t r, auto rows) { f(r0 + r, rows); });
}

}  // namespace IPXC_NS
}  // namespace ipxc
