// The row plumbing layer_norm and rms_norm share: reading x (+ residual) as fp32 and writing
// a normalised row back in the tensor's dtype. Per-level, like common.h.
#pragma once

#include "common.h"

namespace ipxc {
namespace IPXC_NS {

// The fp32 values of row `r` of x (+ residual). Writes the sum to args.sum when asked. For
// bf16 the sum is rounded to bf16 first, as `x + residual` in bf16 would be, so the norm is
// of the same values the caller gets back. May return a pointer into x itself (fp32, no
// residual); otherwise the values are in `buf` (cols floats) or in args.sum's row.
template <class T>
inline const float* norm_input_row(const NormArgs& a, int64_t r, float* __restrict buf) {
    const int64_t n = a.cols;
    const T* __restrict x = static_cast<const T*>(a.x) + r * n;
    if (a.residual == nullptr) {
        if constexpr (sizeof(T) == 4) {
            return reinterpret_cast<const float*>(x);
        } else {
            bf16_row_to_f32(x, buf, n);
            return buf;
        }
    }
    const T* __restrict res = static_cast<const T*>(a.residual) + r * n;
    if constexpr (sizeof(T) == 4) {
        float* __restrict out = a.sum ? static_cast<float*>(a.sum) + r * n : buf;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] + res[i];
        return out;
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) buf[i] = round_to_bf16(load(x[i]) + load(res[i]));
        if (a.sum) f32_row_to_bf16(buf, static_cast<uint16_t*>(a.sum) + r * n, n);  // exact: already bf16 values
        return buf;
    }
}

// Where to compute output row `r`: straight into y for fp32, else into `buf` (then stored).
template <class T>
inline float* norm_output_row(const NormArgs& a, int64_t r, float* buf) {
    if constexpr (sizeof(T) == 4) return static_cast<float*>(a.y) + r * a.cols;
    return buf;
}

template <class T>
inline void norm_store_row(const NormArgs& a, int64_t r, const float* out) {
    if constexpr (sizeof(T) == 2) f32_row_to_bf16(out, static_cast<uint16_t*>(a.y) + r * a.cols, a.cols);
}

}  // namespace IPXC_NS
}  // namespace ipxc
