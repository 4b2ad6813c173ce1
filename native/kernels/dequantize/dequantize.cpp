// dequantize: int8/uint8 -> float32/bfloat16, y = (q - zero_point) * scale, per tensor or per
// channel (channel = row of the [rows, cols] view). The subtraction is exact in int32, then one
// float multiply, as torch's dequantize_val.
#include "quant.h"

namespace ipxc {
namespace IPXC_NS {

template <class Q>
static void dequantize_range(const DequantizeArgs& a, int64_t begin, int64_t end) {
    const Q* __restrict q = static_cast<const Q*>(a.q);
    constexpr int64_t kBlock = 1024;
    float buf[kBlock];  // bf16 output: compute a block in fp32, then store it rounded
    for (int64_t i = begin; i < end;) {
        const int64_t row = i / a.cols;
        const int64_t stop = (row + 1) * a.cols < end ? (row + 1) * a.cols : end;
        const int64_t c = a.per_channel ? row : 0;
        const float scale = a.scales[c];
        const int32_t zp = a.zero_points[c];
        if (a.dtype == DType::f32) {
            float* __restrict y = static_cast<float*>(a.y);
#pragma omp simd
            for (int64_t j = i; j < stop; ++j) y[j] = static_cast<float>(static_cast<int32_t>(q[j]) - zp) * scale;
        } else {
            uint16_t* y = static_cast<uint16_t*>(a.y);
            for (int64_t j0 = i; j0 < stop; j0 += kBlock) {
                const int64_t len = stop - j0 < kBlock ? stop - j0 : kBlock;
#pragma omp simd
                for (int64_t j = 0; j < len; ++j)
                    buf[j] = static_cast<float>(static_cast<int32_t>(q[j0 + j]) - zp) * scale;
                f32_row_to_bf16(buf, y + j0, len);
            }
        }
        i = stop;
    }
}

static void dequantize(const DequantizeArgs& a) {
    if (a.cols <= 0) return;
    parallel(a.rows * a.cols, kElementGrain, a.threads, [&](int64_t begin, int64_t end) {
        a.in_unsigned ? dequantize_range<uint8_t>(a, begin, end) : dequantize_range<int8_t>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(dequantize, dequantize);

}  // namespace IPXC_NS
}  // namespace ipxc
