// The argument struct of the bf16_gemv kernel (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// bf16_gemv: y[r, n] = sum_k x[r, k] * w[n, k] (+ bias[n]) for a few rows (decode: m <= 4), x and w bfloat16,
// the sums in float32, y rounded to bfloat16 once (round to nearest even). w is the linear layer's own
// [n, k] weight, contiguous: no packed copy. Parallel over blocks of output channels.
// bf16_gemm: the same for any number of rows (a prompt), on panels of the weight widened to float32
// (native/kernels/panel_gemm.h); parallel over panels and chunks of rows.
struct Bf16GemvArgs {
    const uint16_t* x = nullptr;  // [m, k] bf16 bits, row r at x + r * x_stride
    int64_t x_stride = 0;
    int64_t m = 0, n = 0, k = 0;
    const uint16_t* w = nullptr;  // [n, k] bf16 bits, contiguous
    const float* bias = nullptr;  // optional, n
    uint16_t* y = nullptr;        // [m, n] bf16 bits, row r at y + r * y_stride
    int64_t y_stride = 0;
    int threads = 1;
    // bf16_gemm's epilogue, before the one rounding (bf16_gemv leaves it to the caller): y = silu(y) where silu,
    // then y + operand (operand_kind 1) or y * operand (2), operand [m, n] bf16 bits, row r at operand + r * n.
    bool silu = false;
    const uint16_t* operand = nullptr;
    int operand_kind = 0;
    // bf16_gemv: weight rows read side by side (8, 16 k a step each, prefetched 2 KiB ahead) or one at a time (1):
    // the binding picks by CPU vendor (native/kernels/bf16_gemv/bf16_gemv.cpp says why).
    int rows_side_by_side = 1;
};

}  // namespace ipxc
