// Helpers shared by the kernel sources. Included only by files compiled once per ISA level.
//
// Everything here lives in namespace ipxc::IPXC_NS (IPXC_NS is the level, set by CMake), so
// every level gets its own copy under its own symbol names. Had these been plain inline
// functions shared by all levels, the linker would keep one copy -- possibly the AVX-512 one --
// and the generic path would run it. For the same reason kernel sources use no std:: templates
// that emit out-of-line code (containers, algorithms); tools/check_level_objects.py checks it.
#pragma once

#ifndef IPXC_NS
#error "kernel sources are compiled once per ISA level with -DIPXC_NS=<level>"
#endif

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#include <immintrin.h>
#define IPXC_HAVE_AVX512 1
#endif
#if defined(__AVX512BF16__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#include <immintrin.h>
#define IPXC_HAVE_AVX512BF16 1
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ipxc/isa.h"
#include "ipxc/kernels.h"
#include "ipxc/parallel.h"

namespace ipxc {
namespace IPXC_NS {

static_assert(static_cast<int>(::ipxc::Level::IPXC_NS) >= 0, "IPXC_NS must name an ipxc::Level");

// ---- bf16 <-> fp32 ---------------------------------------------------------------------------

inline float bf16_to_f32(uint16_t v) {
    const uint32_t u = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Round to nearest even; NaN stays a (quiet) NaN. Branch-free so loops over it vectorise.
inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

// The value x has once stored as bf16.
inline float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

inline void bf16_row_to_f32(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

#if IPXC_HAVE_AVX512
// f32_to_bf16 on 16 lanes: the same rounding (nearest even, denormals kept) and quiet NaNs.
inline __m256i f32x16_to_bf16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, quiet_nan));
}
#elif defined(__AVX2__)
inline __m128i f32x8_to_bf16(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i bits = _mm256_blendv_epi8(rounded, quiet_nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    // every lane is below 2^16, so the unsigned-saturating pack is exact
    return _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
}
#endif

inline void f32_row_to_bf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
#if IPXC_HAVE_AVX512BF16
    // One vcvtneps2bf16 per 16 values instead of ~6 integer ops each. It rounds to nearest
    // even like the scalar path, but flushes denormals to zero (values below ~1e-38).
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    if (i < n) {
        const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail, src + i));
        _mm256_mask_storeu_epi16(dst + i, tail, (__m256i)v);
    }
#elif IPXC_HAVE_AVX512
    // f32_to_bf16 16 lanes at a time (the scalar loop did not vectorise: ~1.5 ns a value, 10 % of a bf16_gemm)
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), f32x16_to_bf16(_mm512_loadu_ps(src + i)));
    if (i < n) {
        const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16(dst + i, tail, f32x16_to_bf16(_mm512_maskz_loadu_ps(tail, src + i)));
    }
#elif defined(__AVX2__)
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), f32x8_to_bf16(_mm256_loadu_ps(src + i)));
    for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
#else
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
#endif
}

// Element type of a tensor: float, or uint16_t holding bf16 bits.
template <class T> inline float load(T v);
template <> inline float load<float>(float v) { return v; }
template <> inline float load<uint16_t>(uint16_t v) { return bf16_to_f32(v); }

#if IPXC_HAVE_AVX512
// The first min(n, 16) of 16 lanes (none for n <= 0).
inline __mmask16 lanes_below(int64_t n) {
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? static_cast<__mmask16>(0)
                                                             : static_cast<__mmask16>((1u << n) - 1u);
}

// 16 bf16 values (their bits) as fp32.
inline __m512 bf16_bits_to_f32(__m256i bits) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)); }

// 16 elements (fewer where `lanes` says; the rest read as 0) as fp32.
inline __m512 load16(const float* p, __mmask16 lanes) { return _mm512_maskz_loadu_ps(lanes, p); }
inline __m512 load16(const uint16_t* p, __mmask16 lanes) {
    return bf16_bits_to_f32(_mm256_maskz_loadu_epi16(lanes, p));
}
#endif
#if IPXC_HAVE_AVX512BF16
// The 16 values as they read back once stored as bf16 (rounded to nearest even).
inline __m512 to_bf16_and_back(__m512 v) { return bf16_bits_to_f32((__m256i)_mm512_cvtneps_pbh(v)); }
#endif

// ---- math --------------------------------------------------------------------------------------

inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// e^x to ~2 ulp, branch-free (vectorises): x = n*ln2 + r, |r| <= ln2/2, e^r by a degree-6
// polynomial, 2^n built in the exponent bits. Below -87.3 the result is 0; above 88 it
// saturates at e^88 ~ 1.7e38 (callers only divide by it).
inline float exp_approx(float x) {
    const float clamped = x > 88.0f ? 88.0f : (x < -87.3f ? -87.3f : x);
    const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float t = clamped * 1.44269504089f + shifter;
    const float n = t - shifter;
    const float r = (clamped - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 split hi/lo
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t tb;
    std::memcpy(&tb, &t, sizeof tb);
    const uint32_t exponent = (tb - 0x4B400000u + 127u) << 23;  // low bits of t hold n
    const float result = p * bits_to_float(exponent);
    return x < -87.3f ? 0.0f : result;  // also keeps NaN (comparisons with NaN are false)
}

// ---- element-wise loops ------------------------------------------------------------------------

// y[i] = f(i) for i in [begin, end), f returning fp32. fp32 outputs are stored directly; bf16
// outputs are computed a block at a time in fp32 and stored rounded. f is a lambda that reads
// its own inputs by index, so one loop serves unary and binary kernels and still vectorises.
template <class T, class F>
inline void elementwise_range(void* y_out, int64_t begin, int64_t end, const F& f) {
    if constexpr (sizeof(T) == 4) {
        float* __restrict y = static_cast<float*>(y_out);
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) y[i] = f(i);
    } else {
        constexpr int64_t kBlock = 1024;
        float buf[kBlock];
        uint16_t* y = static_cast<uint16_t*>(y_out);
        for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
            const int64_t len = end - i0 < kBlock ? end - i0 : kBlock;
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) buf[i] = f(i0 + i);
            f32_row_to_bf16(buf, y + i0, len);
        }
    }
}

// ---- rows and threads --------------------------------------------------------------------------

// Rows per parallel task such that each task has at least ~16K elements of work.
inline int64_t row_grain(int64_t cols) {
    const int64_t g = 16384 / (cols > 0 ? cols : 1);
    return g > 0 ? g : 1;
}
constexpr int64_t kElementGrain = 16384;

// parallel_for over a lambda f(begin, end) (max_chunk: parallel_for's bound on a range's items).
template <class F>
inline void parallel(int64_t n, int64_t grain, int threads, const F& f, int64_t max_chunk = 0) {
    ::ipxc::parallel_for(n, grain, threads,
                         [](void* ctx, int64_t begin, int64_t end) { (*static_cast<const F*>(ctx))(begin, end); },
                         const_cast<F*>(&f), max_chunk);
}

// Ranges of a weight stream (decode GEMVs): at most this many bytes of weights each (~25 us of one core's share of
// DRAM bandwidth), so neither thread idles long at the end (benchmarks/results/session39-stream-chunks.md).
constexpr int64_t kStreamChunkBytes = 256 << 10;
inline int64_t stream_chunk(int64_t bytes_per_item) {
    const int64_t items = kStreamChunkBytes / (bytes_per_item > 0 ? bytes_per_item : 1);
    return items > 0 ? items : 1;
}

// f(n, start, count) for every n < batch and every block [start, start + count) of `block`
// along an axis of `extent`, in parallel; `work` (elements in one full block) sets the grain.
template <class F>
inline void parallel_blocks(int64_t batch, int64_t extent, int64_t block, int64_t work, int threads, const F& f) {
    const int64_t blocks = (extent + block - 1) / block;
    parallel(batch * blocks, work >= kElementGrain ? 1 : kElementGrain / work, threads, [&](int64_t begin, int64_t end) {
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t n = unit / blocks, start = (unit % blocks) * block;
            f(n, start, extent - start < block ? extent - start : block);
        }
    });
}

}  // namespace IPXC_NS
}  // namespace ipxc
