// Rows of x rounded to int8, shared by the integer paths of woq_gemm (woq_gemv_i8.cpp, woq_gemm_w8a8.cpp).
// Included only by files compiled once per ISA level (AVX2 and up): everything is static in IPXC_NS.
#pragma once

#include <immintrin.h>

#include <cfloat>
#include <cmath>

namespace ipxc {
namespace IPXC_NS {

// x row -> int8 codes, xs = max|x| / 127 (1 for a row of zeros), q = round_half_even(x / xs) (a true
// division, as torch.round(x / xs)); returns xs, or NaN when the row holds a NaN or an infinity (the
// op's meaning then gives a row of NaN: the caller writes it, q is left undefined).
static inline float quantize_row_int8(const float* x, int64_t k, int8_t* q) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < k; ++i) {
        const float a = std::fabs(x[i]);
        finite &= a <= FLT_MAX;  // false for NaN and infinity
        amax = a > amax ? a : amax;
    }
    if (!finite) return NAN;
    const float xs = amax > 0.0f ? amax / 127.0f : 1.0f;
    const __m256 s = _mm256_set1_ps(xs);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256i v = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s),
                                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(w16, w16));  // |v| <= 127: no saturation
    }
    for (; i < k; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] / xs));
    return xs;
}

}  // namespace IPXC_NS
}  // namespace ipxc
