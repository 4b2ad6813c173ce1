// rms_norm over the last dim, optionally of x + residual: y = v / sqrt(mean(v^2) + eps) * gamma.
#include "norm_rows.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void rms_norm_rows(const NormArgs& a, int64_t begin, int64_t end) {
    const int64_t n = a.cols;
    const float* __restrict gamma = a.gamma;
    float* buf = scratch_floats(n);
    for (int64_t r = begin; r < end; ++r) {
        const float* v = norm_input_row<T>(a, r, buf);
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < n; ++i) sq += v[i] * v[i];
        const float rstd = 1.0f / __builtin_sqrtf(sq / static_cast<float>(n) + a.eps);

        float* out = norm_output_row<T>(a, r, buf);  // may alias v, element by element
        if (gamma) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = v[i] * rstd * gamma[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = v[i] * rstd;
        }
        norm_store_row<T>(a, r, out);
    }
}

static void rms_norm(const NormArgs& a) {
    parallel(a.rows, row_grain(a.cols), a.threads, [&](int64_t begin, int64_t end) {
        if (a.dtype == DType::bf16)
            rms_norm_rows<uint16_t>(a, begin, end);
        else
            rms_norm_rows<float>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(rms_norm, rms_norm);

}  // namespace IPXC_NS
}  // namespace ipxc
