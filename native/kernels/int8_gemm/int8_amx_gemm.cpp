// int8_amx_gemm (args.h, Int8GemmArgs with w_amx / w_sums): int8_gemm's arithmetic on AMX tiles for linear layers,
// on the panel loop the AMX GEMMs share (amx_panels.h: tdpbusd on uint8 codes and int8 weight quads, each
// 32-channel panel's weight read from memory once a call while every row passes over it, the next panel prefetched
// meanwhile). The tiles sum a * w exactly in int32; a_zero_point * w_sums[n] is subtracted after, which is the exact
// sum of (a - a_zero_point) * w int8_gemm forms (int32 wraps, and the true value fits for k <= 65536). The epilogue
// is int8_gemm's, 16 lanes at a time, with the same float operations in the same order, so both give the same bits.
#include "common.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AMX_INT8__)
#include <immintrin.h>

#include "amx_panels.h"
#include "gelu_erf16.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

// The epilogue constants of 16 columns.
struct Columns16 {
    __m512 scale, bias, multiplier;
    __m512i zero_point_sums;  // a_zero_point * w_sums[n]

    Columns16(const Int8GemmArgs& g, int64_t n0)
        : scale(_mm512_loadu_ps(g.scales + n0)),
          bias(g.bias ? _mm512_loadu_ps(g.bias + n0) : _mm512_setzero_ps()),
          multiplier(g.col_multiplier ? _mm512_loadu_ps(g.col_multiplier + n0) : _mm512_set1_ps(1.0f)),
          zero_point_sums(_mm512_mullo_epi32(_mm512_set1_epi32(g.a_zero_point),
                                             _mm512_loadu_si512(g.w_sums + n0))) {}
};

// float32 -> bf16 bits, round to nearest even, NaN made quiet: common.h's f32_to_bf16 on 16 lanes (not
// vcvtneps2bf16, which flushes denormal inputs to zero).
inline __m256i to_bf16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
    const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet_nan));
}

// One row's 16 values of columns [n0, n0 + 16): int8_gemm's store_tile, 16 lanes.
inline void store16(const Int8GemmArgs& g, int64_t row, int64_t n0, const Columns16& c, __m512i sums) {
    const __m512i acc = _mm512_sub_epi32(sums, c.zero_point_sums);
    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), c.scale, c.bias);
    if (g.residual) {
        if (g.residual_u8) {
            const uint8_t* src = static_cast<const uint8_t*>(g.residual) + row * g.residual_stride + n0;
            const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
            // (q - zp) * scale, as the reference dequantizes: subtract, then multiply
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(static_cast<float>(g.residual_zero_point))),
                                               _mm512_set1_ps(g.residual_scale)));
        } else {
            v = _mm512_add_ps(v, _mm512_loadu_ps(static_cast<const float*>(g.residual) + row * g.residual_stride + n0));
        }
    }
    if (g.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);  // max(0, NaN) is NaN: NaN stays NaN
    if (g.gelu) v = gelu_erf16(v);
    if (g.col_multiplier) v = _mm512_mul_ps(v, c.multiplier);
    if (g.out == GemmOut::f32) {
        _mm512_storeu_ps(static_cast<float*>(g.y) + row * g.y_stride + n0, v);
    } else if (g.out == GemmOut::bf16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(g.y) + row * g.y_stride + n0), to_bf16(v));
    } else {
        // As the quantize kernel: fmaf(v, 1/scale, zp), clamp, round half to even (cvtps2dq in the default rounding
        // mode, exact below 2^22); vmaxps(v, lo) makes NaN lo.
        const bool is_unsigned = g.out == GemmOut::u8;
        const __m512 lo = _mm512_set1_ps(is_unsigned ? 0.0f : -128.0f), hi = _mm512_set1_ps(is_unsigned ? 255.0f : 127.0f);
        const __m512 scaled = _mm512_fmadd_ps(v, _mm512_set1_ps(g.out_inv_scale), _mm512_set1_ps(static_cast<float>(g.out_zero_point)));
        const __m512i codes = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(scaled, lo), hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(g.y) + row * g.y_stride + n0),
                         _mm512_cvtepi32_epi8(codes));  // in range already: truncating keeps the value
    }
}

void int8_amx_gemm(const Int8GemmArgs& g) {
    amx_panel_gemm<AmxProduct::u8s8>(
        g.a, g.a_stride, g.m, g.n / 32, g.k / 64, reinterpret_cast<const uint8_t*>(g.w_amx), g.threads,
        [&](const void* sums, int64_t r0, int64_t rows, int64_t p) {
            const int32_t* s = static_cast<const int32_t*>(sums);
            const Columns16 c0(g, p * 32), c1(g, p * 32 + 16);
            for (int64_t r = 0; r < rows; ++r) {
                store16(g, r0 + r, p * 32, c0, _mm512_load_si512(s + r * 32));
                store16(g, r0 + r, p * 32 + 16, c1, _mm512_load_si512(s + r * 32 + 16));
            }
        });
}

}  // namespace

IPXC_REGISTER_KERNEL(int8_amx_gemm, int8_amx_gemm);

}  // namespace IPXC_NS
}  // namespace ipxc
#endif
