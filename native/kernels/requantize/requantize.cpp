// requantize: the int8 GEMM epilogue. int32 accumulator [rows, cols] -> int8/uint8,
//   y = clamp(nearbyint(float(acc + bias[c]) * multiplier[c]) + zero_point),  c = column,
// multiplier = input_scale * weight_scale[c] / output_scale, folded by the caller. The bias add
// wraps in int32 (as an int32 tensor add would).
#include "quant.h"

namespace ipxc {
namespace IPXC_NS {

template <class Q, bool PerChannel, bool Bias>
static void requantize_rows(const RequantizeArgs& a, int64_t r0, int64_t r1) {
    Q* __restrict y = static_cast<Q*>(a.y);
    const float* __restrict m = a.multipliers;
    const int32_t* __restrict bias = a.bias;
    const int32_t zp = a.zero_point;
    const float lo = QRange<Q>::lo - static_cast<float>(zp), hi = QRange<Q>::hi - static_cast<float>(zp);
    for (int64_t r = r0; r < r1; ++r) {
        const int32_t* __restrict acc = a.acc + r * a.cols;
        Q* __restrict out = y + r * a.cols;
#pragma omp simd
        for (int64_t c = 0; c < a.cols; ++c) {
            const int32_t v = Bias ? static_cast<int32_t>(static_cast<uint32_t>(acc[c]) + static_cast<uint32_t>(bias[c]))
                                   : acc[c];
            out[c] = static_cast<Q>(round_clamp(static_cast<float>(v) * m[PerChannel ? c : 0], lo, hi) + zp);
        }
    }
}

template <class Q>
static void requantize_typed(const RequantizeArgs& a, int64_t r0, int64_t r1) {
    if (a.per_channel)
        a.bias ? requantize_rows<Q, true, true>(a, r0, r1) : requantize_rows<Q, true, false>(a, r0, r1);
    else
        a.bias ? requantize_rows<Q, false, true>(a, r0, r1) : requantize_rows<Q, false, false>(a, r0, r1);
}

static void requantize(const RequantizeArgs& a) {
    if (a.cols <= 0) return;
    parallel(a.rows, row_grain(a.cols), a.threads, [&](int64_t r0, int64_t r1) {
        a.out_unsigned ? requantize_typed<uint8_t>(a, r0, r1) : requantize_typed<int8_t>(a, r0, r1);
    });
}

IPXC_REGISTER_KERNEL(requantize, requantize);

}  // namespace IPXC_NS
}  // namespace ipxc
