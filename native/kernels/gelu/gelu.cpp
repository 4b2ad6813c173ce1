// gelu, exact (erf) or tanh-approximated, computed in fp32.
//   erf:  y = x/2 * (1 + erf(x / sqrt 2))
//   tanh: y = x/2 * (1 + tanh(u)) = x / (1 + e^(-2u)),  u = sqrt(2/pi) * (x + 0.044715 x^3)
#include "common.h"
#include "gelu_erfc.h"

namespace ipxc {
namespace IPXC_NS {

// erfc(z) for z >= 0 (gelu_erfc.h).
static inline float erfc_nonneg(float z) {
    float p = kErfcPoly[0];
    for (int i = 1; i < 7; ++i) p = p * z + kErfcPoly[i];
    p = p * p;  // ^2
    p = p * p;  // ^4
    p = p * p;  // ^8
    p = p * p;  // ^16
    return 1.0f / p;
}

static inline float gelu_erf(float x) {
    const float z = (x < 0.0f ? -x : x) * kInvSqrt2;
    const float c = erfc_nonneg(z);
    return 0.5f * x * (x < 0.0f ? c : 2.0f - c);
}

static inline float gelu_tanh(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + exp_approx(-2.0f * u));
}

template <bool Tanh, class T>
static void gelu_range(const GeluArgs& a, int64_t begin, int64_t end) {
    const T* __restrict x = static_cast<const T*>(a.x);
    elementwise_range<T>(a.y, begin, end, [x](int64_t i) {
        const float v = load(x[i]);
        return Tanh ? gelu_tanh(v) : gelu_erf(v);
    });
}

static void gelu(const GeluArgs& a) {
    parallel(a.n, kElementGrain, a.threads, [&](int64_t begin, int64_t end) {
        const bool bf16 = a.dtype == DType::bf16;
        if (a.tanh)
            bf16 ? gelu_range<true, uint16_t>(a, begin, end) : gelu_range<true, float>(a, begin, end);
        else
            bf16 ? gelu_range<false, uint16_t>(a, begin, end) : gelu_range<false, float>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(gelu, gelu);

}  // namespace IPXC_NS
}  // namespace ipxc
