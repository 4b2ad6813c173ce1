// The argument struct of the f32_gemv kernel (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// f32_gemv: y[r, n] = sum_k x[r, k] * w[n, k] (+ bias[n]) for a few rows (decode: m <= 4), all float32. w is the
// linear layer's own [n, k] weight, contiguous: no packed copy. Parallel over output channels.
struct F32GemvArgs {
    const float* x = nullptr;  // [m, k], row r at x + r * x_stride
    int64_t x_stride = 0;
    int64_t m = 0, n = 0, k = 0;
    const float* w = nullptr;     // [n, k], contiguous
    const float* bias = nullptr;  // optional, n
    float* y = nullptr;           // [m, n], row r at y + r * y_stride
    int64_t y_stride = 0;
    int threads = 1;
};

}  // namespace ipxc
