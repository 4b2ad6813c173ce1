// V16: 16 float32 lanes as one zmm (AVX-512), two ymm (AVX2 + FMA) or a plain array (generic level: loops
// gcc vectorises for SSE2), so one kernel source serves every level. Include after common.h.
//
// Besides arithmetic: V16Lanes (the first n lanes, v_lanes_below) for a row's tail: v_load(p, lanes) (the
// other lanes read as 0, their memory untouched) and v_select; v_all_equal, v_max / v_reduce_max, v_exp (the
// attention softmaxes' e^x, the same values at the two SIMD levels), v_transpose_16x16 (16 rows of V16
// transposed in place) and v_load_pairs / v_pairs_low / v_pairs_high (32 bf16 values as 16 32-bit pairs, for
// transposing bf16 two values at a time, widened after).
#pragma once

#include "common.h"

#if !IPXC_HAVE_AVX512 && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define IPXC_V16_AVX2 1
#endif

namespace ipxc {
namespace IPXC_NS {

#if IPXC_HAVE_AVX512
struct V16 {
    __m512 v;
};
constexpr int kV16Registers = 32;  // V16 values the register file holds
static inline V16 v_zero() { return {_mm512_setzero_ps()}; }
static inline V16 v_set1(float s) { return {_mm512_set1_ps(s)}; }
static inline V16 v_load(const float* p) { return {_mm512_loadu_ps(p)}; }
static inline V16 v_load(const uint16_t* p) {  // 16 bf16 values
    return {bf16_bits_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
// 32 bf16 values as 16 pairs (the raw bits; v_pairs_low / v_pairs_high widen the first / second of each pair)
static inline V16 v_load(const int8_t* p) {  // 16 int8 codes (an int8 KV cache row's)
    return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
}
static inline V16 v_load_pairs(const uint16_t* p) { return {_mm512_castsi512_ps(_mm512_loadu_si512(p))}; }
static inline V16 v_pairs_low(V16 a) { return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(a.v), 16))}; }
static inline V16 v_pairs_high(V16 a) {
    return {_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(-65536)))};
}
static inline void v_store(float* p, V16 a) { _mm512_storeu_ps(p, a.v); }
static inline V16 v_add(V16 a, V16 b) { return {_mm512_add_ps(a.v, b.v)}; }
static inline V16 v_sub(V16 a, V16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
static inline V16 v_mul(V16 a, V16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
static inline V16 v_fma(V16 a, V16 b, V16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
static inline V16 v_fnma(V16 a, V16 b, V16 c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }  // c - a * b
static inline float v_sum(V16 a) { return _mm512_reduce_add_ps(a.v); }
static inline V16 v_max(V16 a, V16 b) { return {_mm512_max_ps(a.v, b.v)}; }
static inline float v_reduce_max(V16 a) { return _mm512_reduce_max_ps(a.v); }
using V16Lanes = __mmask16;
static inline V16Lanes v_lanes_below(int64_t n) { return lanes_below(n); }
static inline V16 v_load(const float* p, V16Lanes lanes) { return {load16(p, lanes)}; }
static inline V16 v_load(const uint16_t* p, V16Lanes lanes) { return {load16(p, lanes)}; }
static inline V16 v_select(V16Lanes lanes, V16 a, V16 b) {  // a in lanes
    return {_mm512_mask_mov_ps(b.v, lanes, a.v)};
}
static inline bool v_all_equal(V16 a, float value) {
    return _mm512_cmp_ps_mask(a.v, _mm512_set1_ps(value), _CMP_EQ_OQ) == 0xFFFF;
}

// v_exp's per-level steps (the polynomial is written once, after the levels).
static inline V16 v_min(V16 a, V16 b) { return {_mm512_min_ps(a.v, b.v)}; }  // b where either is NaN
static inline V16 v_round(V16 a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
static inline V16 v_times_pow2(V16 p, V16 n) { return {_mm512_scalef_ps(p.v, n.v)}; }  // p * 2^n, n integral
static inline V16 v_zero_where_below(V16 x, float bound, V16 y) {  // y, 0 where x < bound (not for NaN x)
    return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x.v, _mm512_set1_ps(bound), _CMP_NLT_UQ), y.v)};
}

// Transposes a 16 x 16 matrix of 32-bit values held in 16 registers, one row each (also the bf16
// attention kernel's key packing, on bf16 pairs).
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
static inline void v_transpose_16x16(V16 m[16]) {
    __m512i bits[16];
    for (int i = 0; i < 16; ++i) bits[i] = _mm512_castps_si512(m[i].v);
    transpose_16x16(bits);
    for (int i = 0; i < 16; ++i) m[i].v = _mm512_castsi512_ps(bits[i]);
}
#elif IPXC_V16_AVX2
struct V16 {
    __m256 a, b;
};
constexpr int kV16Registers = 8;  // 16 ymm
static inline V16 v_zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline V16 v_set1(float s) { return {_mm256_set1_ps(s), _mm256_set1_ps(s)}; }
static inline V16 v_load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline __m256 bf16x8_to_f32(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline V16 v_load(const uint16_t* p) { return {bf16x8_to_f32(p), bf16x8_to_f32(p + 8)}; }
static inline __m256 s8x8_to_f32(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
static inline V16 v_load(const int8_t* p) { return {s8x8_to_f32(p), s8x8_to_f32(p + 8)}; }  // 16 int8 codes
static inline V16 v_load_pairs(const uint16_t* p) {  // 32 bf16 values as 16 pairs, raw bits
    return {_mm256_loadu_ps(reinterpret_cast<const float*>(p)), _mm256_loadu_ps(reinterpret_cast<const float*>(p + 16))};
}
static inline __m256 pairs_low(__m256 a) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(a), 16)); }
static inline __m256 pairs_high(__m256 a) {
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(-65536)));
}
static inline V16 v_pairs_low(V16 x) { return {pairs_low(x.a), pairs_low(x.b)}; }
static inline V16 v_pairs_high(V16 x) { return {pairs_high(x.a), pairs_high(x.b)}; }
static inline void v_store(float* p, V16 x) {
    _mm256_storeu_ps(p, x.a);
    _mm256_storeu_ps(p + 8, x.b);
}
static inline V16 v_add(V16 x, V16 y) { return {_mm256_add_ps(x.a, y.a), _mm256_add_ps(x.b, y.b)}; }
static inline V16 v_sub(V16 x, V16 y) { return {_mm256_sub_ps(x.a, y.a), _mm256_sub_ps(x.b, y.b)}; }
static inline V16 v_mul(V16 x, V16 y) { return {_mm256_mul_ps(x.a, y.a), _mm256_mul_ps(x.b, y.b)}; }
static inline V16 v_fma(V16 x, V16 y, V16 c) { return {_mm256_fmadd_ps(x.a, y.a, c.a), _mm256_fmadd_ps(x.b, y.b, c.b)}; }
static inline V16 v_fnma(V16 x, V16 y, V16 c) { return {_mm256_fnmadd_ps(x.a, y.a, c.a), _mm256_fnmadd_ps(x.b, y.b, c.b)}; }
static inline float v_sum(V16 x) {
    const __m256 s = _mm256_add_ps(x.a, x.b);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
static inline V16 v_max(V16 x, V16 y) { return {_mm256_max_ps(x.a, y.a), _mm256_max_ps(x.b, y.b)}; }
static inline float v_reduce_max(V16 x) {
    const __m256 m = _mm256_max_ps(x.a, x.b);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
// The lanes below n (of 16) all-ones (halves .a: lanes 0-7, .b: 8-15), and n itself.
struct V16Lanes {
    __m256i a, b;
    int32_t n;
};
static inline V16Lanes v_lanes_below(int64_t n) {
    const int32_t count = static_cast<int32_t>(n <= 0 ? 0 : n >= 16 ? 16 : n);
    const __m256i counts = _mm256_set1_epi32(count);
    return {_mm256_cmpgt_epi32(counts, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
            _mm256_cmpgt_epi32(counts, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)), count};
}
static inline V16 v_load(const float* p, const V16Lanes& lanes) {
    return {_mm256_maskload_ps(p, lanes.a), _mm256_maskload_ps(p + 8, lanes.b)};
}
static inline V16 v_load(const uint16_t* p, const V16Lanes& lanes) {  // no 16-bit masked loads below AVX-512
    if (lanes.n == 16) return v_load(p);
    uint16_t first[16] = {};
    std::memcpy(first, p, sizeof(uint16_t) * lanes.n);
    return v_load(first);
}
static inline V16 v_select(const V16Lanes& lanes, V16 x, V16 y) {  // x in lanes
    return {_mm256_blendv_ps(y.a, x.a, _mm256_castsi256_ps(lanes.a)),
            _mm256_blendv_ps(y.b, x.b, _mm256_castsi256_ps(lanes.b))};
}
static inline bool v_all_equal(V16 x, float value) {
    const __m256 s = _mm256_set1_ps(value);
    const __m256 both = _mm256_and_ps(_mm256_cmp_ps(x.a, s, _CMP_EQ_OQ), _mm256_cmp_ps(x.b, s, _CMP_EQ_OQ));
    return _mm256_movemask_ps(both) == 0xFF;
}

// v_exp's per-level steps. 2^n is built in the exponent bits for want of scalef: exact where the result is
// normal, which it is for the n v_exp asks for (x >= -87.3; below, the lane is zeroed; NaN lanes stay NaN via p).
static inline V16 v_min(V16 x, V16 y) { return {_mm256_min_ps(x.a, y.a), _mm256_min_ps(x.b, y.b)}; }
static inline V16 v_round(V16 x) {
    return {_mm256_round_ps(x.a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
            _mm256_round_ps(x.b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
static inline __m256 pow2_bits(__m256 n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
static inline V16 v_times_pow2(V16 p, V16 n) {
    return {_mm256_mul_ps(p.a, pow2_bits(n.a)), _mm256_mul_ps(p.b, pow2_bits(n.b))};
}
static inline V16 v_zero_where_below(V16 x, float bound, V16 y) {
    const __m256 b = _mm256_set1_ps(bound);
    return {_mm256_and_ps(_mm256_cmp_ps(x.a, b, _CMP_NLT_UQ), y.a), _mm256_and_ps(_mm256_cmp_ps(x.b, b, _CMP_NLT_UQ), y.b)};
}

// Transposes 8 rows of 8 floats in place.
static inline void transpose_8x8(__m256 m[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {  // t[2i]: rows 2i, 2i+1 interleaved, columns 0-1 | 4-5; t[2i+1]: 2-3 | 6-7
        t[2 * i] = _mm256_unpacklo_ps(m[2 * i], m[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(m[2 * i], m[2 * i + 1]);
    }
    for (int g = 0; g < 2; ++g) {  // u[4g + j]: rows 4g .. 4g+3 of column j | column j + 4
        u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
        m[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        m[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}
// Four 8 x 8 blocks: block (row half R, column half C) lands at (C, R).
static inline void v_transpose_16x16(V16 m[16]) {
    __m256 block[4][8];  // [2R + C]
    for (int i = 0; i < 8; ++i) {
        block[0][i] = m[i].a, block[1][i] = m[i].b, block[2][i] = m[8 + i].a, block[3][i] = m[8 + i].b;
    }
    for (int q = 0; q < 4; ++q) transpose_8x8(block[q]);
    for (int i = 0; i < 8; ++i) {
        m[i].a = block[0][i], m[i].b = block[2][i], m[8 + i].a = block[1][i], m[8 + i].b = block[3][i];
    }
}
#else
struct V16 {
    float f[16];
};
constexpr int kV16Registers = 4;
static inline V16 v_zero() { return V16{}; }
static inline V16 v_set1(float s) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = s;
    return r;
}
static inline V16 v_load(const float* p) {
    V16 r;
    std::memcpy(r.f, p, sizeof r.f);
    return r;
}
static inline V16 v_load(const uint16_t* p) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = bf16_to_f32(p[j]);
    return r;
}
static inline V16 v_load(const int8_t* p) {  // 16 int8 codes
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = static_cast<float>(p[j]);
    return r;
}
static inline V16 v_load_pairs(const uint16_t* p) {  // 32 bf16 values as 16 pairs, raw bits
    V16 r;
    std::memcpy(r.f, p, sizeof r.f);
    return r;
}
static inline V16 v_pairs_part(const V16& a, bool high) {
    V16 r;
    for (int j = 0; j < 16; ++j) {
        uint32_t u;
        std::memcpy(&u, &a.f[j], sizeof u);
        u = high ? u & 0xFFFF0000u : u << 16;
        std::memcpy(&r.f[j], &u, sizeof u);
    }
    return r;
}
static inline V16 v_pairs_low(const V16& a) { return v_pairs_part(a, false); }
static inline V16 v_pairs_high(const V16& a) { return v_pairs_part(a, true); }
static inline void v_store(float* p, const V16& a) { std::memcpy(p, a.f, sizeof a.f); }
static inline V16 v_add(const V16& a, const V16& b) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = a.f[j] + b.f[j];
    return r;
}
static inline V16 v_sub(const V16& a, const V16& b) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = a.f[j] - b.f[j];
    return r;
}
static inline V16 v_mul(const V16& a, const V16& b) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = a.f[j] * b.f[j];
    return r;
}
static inline V16 v_fma(const V16& a, const V16& b, const V16& c) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = a.f[j] * b.f[j] + c.f[j];
    return r;
}
static inline V16 v_fnma(const V16& a, const V16& b, const V16& c) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = c.f[j] - a.f[j] * b.f[j];
    return r;
}
static inline float v_sum(const V16& a) {
    float s = 0.0f;
    for (int j = 0; j < 16; ++j) s += a.f[j];
    return s;
}
static inline V16 v_max(const V16& a, const V16& b) {  // b where either is NaN, as maxps
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = a.f[j] > b.f[j] ? a.f[j] : b.f[j];
    return r;
}
static inline float v_reduce_max(const V16& a) {
    float m = a.f[0];
    for (int j = 1; j < 16; ++j) m = m > a.f[j] ? m : a.f[j];
    return m;
}
struct V16Lanes {  // the first n lanes
    int n;
};
static inline V16Lanes v_lanes_below(int64_t n) { return {static_cast<int>(n <= 0 ? 0 : n >= 16 ? 16 : n)}; }
template <class T>
static inline V16 v_load(const T* p, V16Lanes lanes) {
    V16 r{};
    for (int j = 0; j < lanes.n; ++j) r.f[j] = load(p[j]);
    return r;
}
static inline V16 v_select(V16Lanes lanes, const V16& a, const V16& b) {  // a in lanes
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = j < lanes.n ? a.f[j] : b.f[j];
    return r;
}
static inline bool v_all_equal(const V16& a, float value) {
    bool all = true;
    for (int j = 0; j < 16; ++j) all = all && a.f[j] == value;
    return all;
}
// exp_approx: the same range handling as the SIMD levels' v_exp (0 below -87.3, NaN kept), one polynomial
// degree more.
static inline V16 v_exp(const V16& a) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = exp_approx(a.f[j]);
    return r;
}
static inline void v_transpose_16x16(V16 m[16]) {
    for (int i = 0; i < 16; ++i)
        for (int j = i + 1; j < 16; ++j) {
            const float t = m[i].f[j];
            m[i].f[j] = m[j].f[i];
            m[j].f[i] = t;
        }
}
#endif

#if IPXC_HAVE_AVX512 || IPXC_V16_AVX2
// e^x: x = n ln2 + r, |r| <= ln2/2, a degree-5 polynomial for e^r (relative error < 3e-6), scaled by 2^n; the
// same values at both SIMD levels. Exactly 0 below -87.3 (padding and masked keys): e^-88 would be an fp32
// denormal, and arithmetic on denormals takes microcode assists (measured: the attention kernel ran 2x slower
// with masked keys). NaN stays NaN, as in torch: a NaN score makes its row NaN (the compare is unordered-true,
// and min returns its second operand when one is NaN, so x goes second).
static inline V16 v_exp(V16 x) {
    const V16 y = v_min(v_set1(88.0f), x);
    const V16 n = v_round(v_mul(y, v_set1(1.44269504089f)));
    V16 r = v_fnma(n, v_set1(0.693145751953125f), y);
    r = v_fnma(n, v_set1(1.428606765330187e-06f), r);
    V16 p = v_set1(1.0f / 120.0f);
    p = v_fma(p, r, v_set1(1.0f / 24.0f));
    p = v_fma(p, r, v_set1(1.0f / 6.0f));
    p = v_fma(p, r, v_set1(0.5f));
    p = v_fma(p, r, v_set1(1.0f));
    p = v_fma(p, r, v_set1(1.0f));
    return v_zero_where_below(x, -87.3f, v_times_pow2(p, n));
}
#endif

}  // namespace IPXC_NS
}  // namespace ipxc
