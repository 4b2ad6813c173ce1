// The argument struct(s) of the requantize kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// The int8 GEMM epilogue on an int32 accumulator [rows, cols]; channel = column (the last
// axis: GEMM output channels). y = clamp(nearbyint((acc + bias[c]) * multiplier[c]) + zero_point)
struct RequantizeArgs {
    const int32_t* acc = nullptr;
    void* y = nullptr;                    // int8 or uint8
    int64_t rows = 0, cols = 0;
    const float* multipliers = nullptr;   // cols, or 1 when !per_channel
    const int32_t* bias = nullptr;        // optional, cols
    bool per_channel = true;
    int32_t zero_point = 0;
    bool out_unsigned = false;
    int threads = 1;
};

}  // namespace ipxc
