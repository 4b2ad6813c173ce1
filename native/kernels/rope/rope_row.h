// One row of the rotate-half rotary embedding, shared by rope.cpp and rope_kv_append.cpp (compiled per level).
#pragma once

#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void load_row_as_f32(const void* base, int64_t offset, int64_t n, float* __restrict dst) {
    const T* __restrict src = static_cast<const T*>(base) + offset;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = load(src[i]);
}

static void load_any(DType dtype, const void* base, int64_t offset, int64_t n, float* dst) {
    if (dtype == DType::bf16)
        load_row_as_f32<uint16_t>(base, offset, n, dst);
    else
        load_row_as_f32<float>(base, offset, n, dst);
}

// y = x * c + rotate_half(x) * s over d values (d even), all float32.
static void rotate_half_row(const float* __restrict x, const float* __restrict c, const float* __restrict s,
                            float* __restrict y, int64_t d) {
    const int64_t half = d / 2;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) y[i] = x[i] * c[i] - x[i + half] * s[i];
#pragma omp simd
    for (int64_t i = half; i < d; ++i) y[i] = x[i] * c[i] + x[i - half] * s[i];
}

// Writes d float32 values at element `offset` of `base`, rounded once to `dtype`.
static void store_any(DType dtype, const float* __restrict y, void* base, int64_t offset, int64_t d) {
    if (dtype == DType::bf16) {
        f32_row_to_bf16(y, static_cast<uint16_t*>(base) + offset, d);
    } else {
        float* __restrict out = static_cast<float*>(base) + offset;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) out[i] = y[i];
    }
}

}  // namespace IPXC_NS
}  // namespace ipxc
