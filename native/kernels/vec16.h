// V16: 16 float32 lanes as one zmm (AVX-512), two ymm (AVX2 + FMA) or a plain array (generic level: loops
// gcc vectorises for SSE2), so one kernel source serves every level. Include after common.h.
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
static inline void v_store(float* p, V16 a) { _mm512_storeu_ps(p, a.v); }
static inline V16 v_add(V16 a, V16 b) { return {_mm512_add_ps(a.v, b.v)}; }
static inline V16 v_sub(V16 a, V16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
static inline V16 v_mul(V16 a, V16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
static inline V16 v_fma(V16 a, V16 b, V16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
static inline V16 v_fnma(V16 a, V16 b, V16 c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }  // c - a * b
static inline float v_sum(V16 a) { return _mm512_reduce_add_ps(a.v); }
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
#endif

}  // namespace IPXC_NS
}  // namespace ipxc
