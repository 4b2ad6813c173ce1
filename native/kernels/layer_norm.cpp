// layer_norm over the last dim, optionally of x + residual: y = (v - mean) / sqrt(var + eps) * gamma + beta.
// Statistics in fp32, two passes over the row (more accurate than one-pass sums of squares,
// and the row is in cache for the second pass).
#include "norm_rows.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void layer_norm_rows(const NormArgs& a, int64_t begin, int64_t end) {
    const int64_t n = a.cols;
    const float* __restrict gamma = a.gamma;
    const float* __restrict beta = a.beta;
    float* buf = scratch_floats(n);
    for (int64_t r = begin; r < end; ++r) {
        const float* v = norm_input_row<T>(a, r, buf);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; ++i) sum += v[i];
        const float mean = sum / static_cast<float>(n);
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < n; ++i) sq += (v[i] - mean) * (v[i] - mean);
        const float rstd = 1.0f / __builtin_sqrtf(sq / static_cast<float>(n) + a.eps);

        // out may alias v (both are buf for bf16): each element is read before it is written.
        float* out = norm_output_row<T>(a, r, buf);
        if (gamma && beta) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = (v[i] - mean) * rstd * gamma[i] + beta[i];
        } else if (gamma) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = (v[i] - mean) * rstd * gamma[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = (v[i] - mean) * rstd + (beta ? beta[i] : 0.0f);
        }
        norm_store_row<T>(a, r, out);
    }
}

static void layer_norm(const NormArgs& a) {
    parallel(a.rows, row_grain(a.cols), a.threads, [&](int64_t begin, int64_t end) {
        if (a.dtype == DType::bf16)
            layer_norm_rows<uint16_t>(a, begin, end);
        else
            layer_norm_rows<float>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(layer_norm, layer_norm);

}  // namespace IPXC_NS
}  // namespace ipxc
