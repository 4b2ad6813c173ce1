// silu_mul: y = silu(a) * b, the gate of SwiGLU MLPs, in one pass instead of two.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void silu_mul_range(const BinaryArgs& args, int64_t begin, int64_t end) {
    const T* __restrict a = static_cast<const T*>(args.a);
    const T* __restrict b = static_cast<const T*>(args.b);
    elementwise_range<T>(args.y, begin, end, [a, b](int64_t i) {
        const float v = load(a[i]);
        return v / (1.0f + exp_approx(-v)) * load(b[i]);
    });
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
