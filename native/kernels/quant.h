// Shared by the INT8 kernels (quantize, dequantize, requantize) and the quantized outputs of
// layer_norm and attention: rounding to an integer code.
// Compiled once per ISA level like common.h.
#pragma once

#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class Q> struct QRange;
template <> struct QRange<int8_t> { static constexpr float lo = -128.0f, hi = 127.0f; };
template <> struct QRange<uint8_t> { static constexpr float lo = 0.0f, hi = 255.0f; };

// x * inv + zp rounded once, as fmaf. Without FMA: the product of two floats is exact in
// double, and so is the sum unless |x * inv| is tiny next to zp, where the result rounds to zp
// either way; so the integer code equals the one from fmaf. Both forms vectorise.
inline float fma_f32(float x, float inv, float zp) {
#ifdef __FMA__
    return __builtin_fmaf(x, inv, zp);
#else
    return static_cast<float>(static_cast<double>(x) * static_cast<double>(inv) + static_cast<double>(zp));
#endif
}

// nearbyint(v) clamped to [lo, hi] (integers). Clamping first is equivalent (the bounds are
// integers) and keeps |v| < 2^22, where adding and subtracting 1.5 * 2^23 rounds half to even
// in the default rounding mode without needing roundps (absent below SSE4.1), so it vectorises
// at every level. The clamp also sits between whatever produced v and the add, so the compiler
// cannot contract the two into an FMA. NaN becomes lo.
inline int32_t round_clamp(float v, float lo, float hi) {
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    const float shifter = 12582912.0f;
    return static_cast<int32_t>((v + shifter) - shifter);
}

// One value quantized as Quantize16 (below) does it, for levels without AVX-512: per tensor
// round_clamp(fmaf(y, 1/scale, zp)); with multipliers y * m rounded on its own, clamped to the range
// shifted by zp, zp added after. NaN becomes lo, as there. Returns the int8 or uint8 code's byte.
struct QuantizeOne {
    const float* multipliers;  // or null: per tensor
    float inv, zp, lo, hi;

    QuantizeOne(const float* multipliers_or_null, float scale, int32_t zero_point, bool is_unsigned)
        : multipliers(multipliers_or_null), inv(1.0f / scale), zp(static_cast<float>(zero_point)),
          lo(is_unsigned ? 0.0f : -128.0f), hi(is_unsigned ? 255.0f : 127.0f) {}
    int8_t operator()(float y, int64_t i) const {
        const int32_t code = multipliers
                                 ? round_clamp(y * multipliers[i], lo - zp, hi - zp) + static_cast<int32_t>(zp)
                                 : round_clamp(fma_f32(y, inv, zp), lo, hi);
        return static_cast<int8_t>(code);
    }
};

#if IPXC_HAVE_AVX512
// 16 float values quantized as the quantize kernels do it (layer_norm's and attention's quantized
// outputs use it). Per tensor: fmaf(y, 1/scale, zp), then clamp, as quantize.cpp. With
// multipliers (SmoothQuant): y * m rounded on its own, clamped to the range shifted by zp, zp added
// after rounding, as quantize_last_axis.cpp. The clamp keeps values below 2^22 in magnitude, where
// vcvtps2dq (round to nearest even, the default mode) equals round_clamp's shifter trick; vmaxps
// returns its second operand for NaN, so NaN becomes lo.
struct Quantize16 {
    const float* multipliers;  // or null: per tensor
    __m512 inv, zp_before, lo, hi;
    __m512i zp_after;

    Quantize16(const float* multipliers_or_null, float scale, int32_t zero_point, bool is_unsigned)
        : multipliers(multipliers_or_null) {
        const float lo_code = is_unsigned ? 0.0f : -128.0f, hi_code = is_unsigned ? 255.0f : 127.0f;
        const float zp = static_cast<float>(zero_point);
        const float shift = multipliers ? zp : 0.0f;
        inv = _mm512_set1_ps(1.0f / scale);
        zp_before = _mm512_set1_ps(multipliers ? 0.0f : zp);
        lo = _mm512_set1_ps(lo_code - shift);
        hi = _mm512_set1_ps(hi_code - shift);
        zp_after = _mm512_set1_epi32(static_cast<int32_t>(shift));
    }
    // The codes of y (multipliers from index i), as bytes: int8 or uint8 alike after the clamp.
    __m128i operator()(__m512 y, int64_t i, __mmask16 lanes) const {
        const __m512 v = multipliers ? _mm512_mul_ps(y, _mm512_maskz_loadu_ps(lanes, multipliers + i))
                                     : _mm512_fmadd_ps(y, inv, zp_before);
        const __m512 clamped = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        return _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(clamped), zp_after));
    }
};
#endif

}  // namespace IPXC_NS
}  // namespace ipxc
