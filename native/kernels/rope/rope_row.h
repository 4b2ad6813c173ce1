// One row of the rotate-half rotary embedding, shared by rope.cpp and rope_kv_append.cpp (compiled per level).
#pragma once

#include <cmath>
#include <cstring>

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

// y rounded to bfloat16 values in place (nearest even), still as float32.
static void round_to_bf16(float* __restrict y, int64_t d) {
    uint16_t bits[1024];  // head size <= 1024 (the binding checks)
    f32_row_to_bf16(y, bits, d);
    for (int64_t i = 0; i < d; ++i) y[i] = load(bits[i]);
}

// Writes d float32 values as one int8 cache row at `out`: d codes, then the row's float32 scale (ir/ops/_kv_int8.py:
// scale = max |y| / 127, code = round half to even of y / scale; a row with NaN or infinity: scale NaN, codes 0).
static void store_int8_row(const float* __restrict y, int8_t* __restrict out, int64_t d) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < d; ++i) {
        const float a = std::fabs(y[i]);
        finite = finite && a <= 3.4028234663852886e38f;  // false for NaN and infinity
        amax = a > amax ? a : amax;
    }
    const float scale = finite ? amax / 127.0f : NAN;
    if (finite && scale > 0.0f) {
        for (int64_t i = 0; i < d; ++i) {
            float code = std::nearbyint(y[i] / scale);  // (round half to even: the default rounding mode)
            code = code > 127.0f ? 127.0f : code < -127.0f ? -127.0f : code;
            out[i] = static_cast<int8_t>(code);
        }
    } else {
        for (int64_t i = 0; i < d; ++i) out[i] = 0;
    }
    std::memcpy(out + d, &scale, sizeof scale);
}

// Values a cache row of d heads' values holds in `dtype`'s elements (an int8 row: d codes and 4 scale bytes).
static inline int64_t cache_row_elements(DType dtype, int64_t d) { return dtype == DType::s8_rows ? d + 4 : d; }

// Writes d float32 values at element `offset` of `base`, rounded once to `dtype` (or as an int8 cache row).
static void store_any(DType dtype, const float* __restrict y, void* base, int64_t offset, int64_t d) {
    if (dtype == DType::s8_rows) {
        store_int8_row(y, static_cast<int8_t*>(base) + offset, d);
    } else if (dtype == DType::bf16) {
        f32_row_to_bf16(y, static_cast<uint16_t*>(base) + offset, d);
    } else {
        float* __restrict out = static_cast<float*>(base) + offset;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) out[i] = y[i];
    }
}

}  // namespace IPXC_NS
}  // namespace ipxc
