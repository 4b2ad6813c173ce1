// quantize: float32/bfloat16 -> int8/uint8, y = clamp(nearbyint(x * (1 / scale) + zero_point)),
// per tensor or per channel (channel = row of the [rows, cols] view), bit-identical to torch:
// the reciprocal is taken in float, and the zero point is added before rounding (so a half
// rounds to even after the shift). torch's per-tensor kernel fuses multiply and add (one
// rounding, FMA), its per-channel one rounds the product first; we do the same, which is why
// this file is compiled with -ffp-contract=off (CMakeLists.txt).
#include "quant.h"

namespace ipxc {
namespace IPXC_NS {

template <class T, class Q, bool Fused>
static void quantize_range(const QuantizeArgs& a, int64_t begin, int64_t end) {
    const T* __restrict x = static_cast<const T*>(a.x);
    Q* __restrict y = static_cast<Q*>(a.y);
    // The flat range may start and end mid-row; go one row segment at a time.
    for (int64_t i = begin; i < end;) {
        const int64_t row = i / a.cols;
        const int64_t stop = (row + 1) * a.cols < end ? (row + 1) * a.cols : end;
        const int64_t c = a.per_channel ? row : 0;
        const float inv = 1.0f / a.scales[c];
        const float zp = static_cast<float>(a.zero_points[c]);
#pragma omp simd
        for (int64_t j = i; j < stop; ++j) {
            const float v = Fused ? fma_f32(load(x[j]), inv, zp) : load(x[j]) * inv + zp;
            y[j] = static_cast<Q>(round_clamp(v, QRange<Q>::lo, QRange<Q>::hi));
        }
        i = stop;
    }
}

template <bool Fused>
static void quantize_typed(const QuantizeArgs& a, int64_t begin, int64_t end) {
    const bool bf16 = a.dtype == DType::bf16;
    if (a.out_unsigned)
        bf16 ? quantize_range<uint16_t, uint8_t, Fused>(a, begin, end) : quantize_range<float, uint8_t, Fused>(a, begin, end);
    else
        bf16 ? quantize_range<uint16_t, int8_t, Fused>(a, begin, end) : quantize_range<float, int8_t, Fused>(a, begin, end);
}

static void quantize(const QuantizeArgs& a) {
    if (a.cols <= 0) return;
    parallel(a.rows * a.cols, kElementGrain, a.threads, [&](int64_t begin, int64_t end) {
        if (a.per_channel)
            quantize_typed<false>(a, begin, end);
        else
            quantize_typed<true>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(quantize, quantize);

}  // namespace IPXC_NS
}  // namespace ipxc
