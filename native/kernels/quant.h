// Shared by the INT8 kernels (quantize, dequantize, requantize): rounding to an integer code.
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

}  // namespace IPXC_NS
}  // namespace ipxc
