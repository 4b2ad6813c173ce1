// silu: y = x * sigmoid(x) = x / (1 + e^-x), computed in fp32.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void silu_range(const UnaryArgs& a, int64_t begin, int64_t end) {
    const T* __restrict x = static_cast<const T*>(a.x);
    elementwise_range<T>(a.y, begin, end, [x](int64_t i) {
        const float v = load(x[i]);
        return v / (1.0f + exp_approx(-v));
    });
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
