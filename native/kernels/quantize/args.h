// The argument struct(s) of the quantize kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

struct QuantizeArgs {  // y = clamp(nearbyint(x * (1 / scale)) + zero_point)
    const void* x = nullptr;         // f32 or bf16
    void* y = nullptr;               // int8 or uint8
    int64_t rows = 0, cols = 0;
    const float* scales = nullptr;   // 1 or rows
    const int32_t* zero_points = nullptr;
    bool per_channel = false;
    bool out_unsigned = false;
    DType dtype = DType::f32;
    int threads = 1;
};

}  // namespace ipxc
