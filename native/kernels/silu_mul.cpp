// silu_mul: y = silu(a) * b, the gate of SwiGLU MLPs, in one pass instead of two.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void silu_mul_range(const BinaryArgs& args, int64_t begin, int64_t end) {
    const T* __restrict a = static_cast<const T*>(args.a);
    const T* __restrict b = static_cast<const T*>(args.b);
    if constexpr (sizeof(T) == 4) {
        float* __restrict y = static_cast<float*>(args.y);
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) y[i] = a[i] / (1.0f + exp_approx(-a[i])) * b[i];
    } else {
        constexpr int64_t kBlock = 1024;  // compute a block in fp32, then store it rounded
        float buf[kBlock];
        uint16_t* y = static_cast<uint16_t*>(args.y);
        for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
            const int64_t len = end - i0 < kBlock ? end - i0 : kBlock;
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) {
                const float v = load(a[i0 + i]);
                buf[i] = v / (1.0f + exp_approx(-v)) * load(b[i0 + i]);
            }
            f32_row_to_bf16(buf, y + i0, len);
        }
    }
}

static void silu_mul(const BinaryArgs& args) {
    parallel(args.n, kElementGrain, args.threads, [&](int64_t begin, int64_t end) {
        if (args.dtype == DType::bf16)
            silu_mul_range<uint16_t>(args, begin, end);
        else
            silu_mul_range<float>(args, begin, end);
    });
}

IPXC_REGISTER_KERNEL(silu_mul, silu_mul);

}  // namespace IPXC_NS
}  // namespace ipxc
