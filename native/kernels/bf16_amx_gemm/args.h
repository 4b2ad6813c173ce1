// The argument struct of the bf16_amx_gemm kernel (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// bf16_amx_gemm: y[r, n] = unary(sum_k x[r, k] * w[n, k] + bias[n]) for bfloat16 x and w on AMX tiles (tdpbf16ps:
// pair products exact, sums in float32), y rounded to bfloat16 once (nearest even). For a few hundred rows (a
// BERT-base sentence is 128) a layer is bound by streaming its weight from memory: every 32 output channels'
// weights are read from memory once per call and kept in L1/L2 while all the call's rows pass over them.
//
// Packed weight (ipexconvert/backends/cpu/kernels/linear.py pack_amx_weight, once at load): n and k multiples of
// 32, w is bfloat16 [n / 32][k / 32][16][32][2]: per block of 32 output channels and 32 k, 16 rows of k-pairs,
// each row the 32 channels' pairs side by side (2 KiB a block). The B tile of channels 16h .. 16h + 15 and those
// 32 k is 16 rows of 64 bytes at offset 64h, 128 bytes apart.
struct Bf16AmxGemmArgs {
    const uint16_t* x = nullptr;  // [m, k] bf16 bits, row r at x + r * x_stride
    int64_t x_stride = 0;
    int64_t m = 0, n = 0, k = 0;  // n and k multiples of 32
    const uint16_t* w = nullptr;  // packed, see above
    const float* bias = nullptr;  // optional, n
    uint16_t* y = nullptr;        // [m, n] bf16 bits, row r at y + r * y_stride
    int64_t y_stride = 0;
    int unary = 0;                // applied to the float32 sums (bias added) before the rounding: 0 none, 1 relu,
                                  // 2 the erf GELU (gelu_erfc.h's arithmetic)
    int threads = 1;
};

}  // namespace ipxc
