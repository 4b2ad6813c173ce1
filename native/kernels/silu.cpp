// silu: y = x * sigmoid(x) = x / (1 + e^-x), computed in fp32.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void silu_range(const UnaryArgs& a, int64_t begin, int64_t end) {
    const T* __restrict x = static_cast<const T*>(a.x);
    if constexpr (sizeof(T) == 4) {
        float* __restrict y = static_cast<float*>(a.y);
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) y[i] = x[i] / (1.0f + exp_approx(-x[i]));
    } else {
        constexpr int64_t kBlock = 1024;  // compute a block in fp32, then store it rounded
        float buf[kBlock];
        uint16_t* y = static_cast<uint16_t*>(a.y);
        for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
            const int64_t len = end - i0 < kBlock ? end - i0 : kBlock;
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) {
                const float v = load(x[i0 + i]);
                buf[i] = v / (1.0f + exp_approx(-v));
            }
            f32_row_to_bf16(buf, y + i0, len);
        }
    }
}

static void silu(const UnaryArgs& a) {
    parallel(a.n, kElementGrain, a.threads, [&](int64_t begin, int64_t end) {
        if (a.dtype == DType::bf16)
            silu_range<uint16_t>(a, begin, end);
        else
            silu_range<float>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(silu, silu);

}  // namespace IPXC_NS
}  // namespace ipxc
