// AVX-512 helpers both attention kernels use (attention.cpp: bf16, attention_f32.cpp: fp32).
// Included inside nothing: it opens ipxc::IPXC_NS itself, like common.h.
#pragma once

#include "common.h"

#if !IPXC_HAVE_AVX512
#error "attention_simd.h needs an AVX-512 level"
#endif

namespace ipxc {
namespace IPXC_NS {

// Element (b, h, 0, 0) of a [batch, heads, seq, head_dim] tensor whose element strides for
// batch, head and seq are strides[0..2] (AttentionArgs' q/k/v/out/mask).
template <class T>
inline T* head_at(const void* base, const int64_t* strides, int64_t b, int64_t h) {
    return const_cast<T*>(static_cast<const T*>(base)) + b * strides[0] + h * strides[1];
}

// Transposes a 16 x 16 matrix of 32-bit values held in 16 registers, one row each.
inline void transpose_16x16(__m512i m[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; ++i) {  // t[2i], t[2i+1]: rows 2i and 2i+1 interleaved (per 128-bit lane)
        t[2 * i] = _mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]);
    }
    for (int g = 0; g < 4; ++g) {  // u[4g + j], lane L: rows 4g .. 4g+3 of column 4L + j
        u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int j = 0; j < 4; ++j) {  // gather lane L of u[j], u[4+j], u[8+j], u[12+j] into column 4L + j
        const __m512i even_lo = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i odd_lo = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        const __m512i even_hi = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i odd_hi = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        m[j] = _mm512_shuffle_i32x4(even_lo, even_hi, 0x88);
        m[8 + j] = _mm512_shuffle_i32x4(even_lo, even_hi, 0xdd);
        m[4 + j] = _mm512_shuffle_i32x4(odd_lo, odd_hi, 0x88);
        m[12 + j] = _mm512_shuffle_i32x4(odd_lo, odd_hi, 0xdd);
    }
}

// e^x for 16 lanes: x = n ln2 + r, |r| <= ln2/2, a degree-5 polynomial for e^r (relative error
// < 3e-6, far below P's bf16 rounding), scaled by 2^n. Exactly 0 below -87.3 (padding and
// masked keys): e^-88 would be an fp32 denormal, and arithmetic on denormals takes microcode
// assists (measured: the whole kernel ran 2x slower with masked keys). NaN stays NaN, as in
// torch: a NaN score makes its row NaN (the compare is unordered-true, and min_ps returns its
// second operand when one is NaN, so x goes second).
inline __m512 exp16(__m512 x) {
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 120.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

// The two passes over a row of scores both softmaxes share. Pass 1: s = s * scale + mask in
// place, -inf past kv_len (so e = 0 there), returning the row's max. Two vectors a step
// (kv_pad is a multiple of 32) so the max chains run two abreast.
template <class M>
inline float scale_mask_max(float* __restrict s, const M* __restrict mask, float scale, int64_t kv_len,
                            int64_t kv_pad) {
    const __m512 scale16 = _mm512_set1_ps(scale), minus_inf = _mm512_set1_ps(-__builtin_inff());
    __m512 max_a = minus_inf, max_b = minus_inf;
    for (int64_t j = 0; j < kv_pad; j += 32) {
        const __mmask16 lanes_a = lanes_below(kv_len - j), lanes_b = lanes_below(kv_len - j - 16);
        const __m512 mask_a = mask ? load16(mask + j, lanes_a) : _mm512_setzero_ps();
        const __m512 mask_b = mask ? load16(mask + j + 16, lanes_b) : _mm512_setzero_ps();
        __m512 a = _mm512_fmadd_ps(_mm512_loadu_ps(s + j), scale16, mask_a);
        __m512 b = _mm512_fmadd_ps(_mm512_loadu_ps(s + j + 16), scale16, mask_b);
        a = _mm512_mask_mov_ps(minus_inf, lanes_a, a);
        b = _mm512_mask_mov_ps(minus_inf, lanes_b, b);
        _mm512_storeu_ps(s + j, a);
        _mm512_storeu_ps(s + j + 16, b);
        max_a = _mm512_max_ps(max_a, a);
        max_b = _mm512_max_ps(max_b, b);
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(max_a, max_b));
}

// Pass 2: e = e^(s - max), handed to store(j, e[j .. j + 16), e[j + 16 .. j + 32)); returns
// 1 / sum(e) of the unrounded values. store may overwrite s[j, j + 32) (no restrict on s).
template <class Store>
inline float exp_and_sum(const float* s, float row_max, int64_t kv_pad, const Store& store) {
    const __m512 max = _mm512_set1_ps(row_max);
    __m512 sum_a = _mm512_setzero_ps(), sum_b = _mm512_setzero_ps();
    for (int64_t j = 0; j < kv_pad; j += 32) {
        const __m512 a = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), max));
        const __m512 b = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j + 16), max));
        sum_a = _mm512_add_ps(sum_a, a);
        sum_b = _mm512_add_ps(sum_b, b);
        store(j, a, b);
    }
    return 1.0f / _mm512_reduce_add_ps(_mm512_add_ps(sum_a, sum_b));
}

}  // namespace IPXC_NS
}  // namespace ipxc
